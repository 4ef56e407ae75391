import Foundation
import Glibc

/// A real forward proxy (Debian's tinyproxy), started by a test on a free loopback port, whose log
/// proves which requests went through it.
final class ForwardProxy: @unchecked Sendable {
    // @unchecked Sendable: every stored property is immutable; `ChildProcess` guards its own state.
    static let path = "/usr/bin/tinyproxy"
    /// The user and password the proxy wants, when started with `authenticated`.
    static let user = "bob"
    static let password = "pr0xy-s3cret-51b7"

    let folder: URL
    let port: Int
    private let process: ChildProcess

    private init(folder: URL, port: Int, process: ChildProcess) {
        self.folder = folder
        self.port = port
        self.process = process
    }

    /// `http://127.0.0.1:PORT`, with the user and password when `credentials`.
    func url(credentials: Bool = false, password: String = ForwardProxy.password) -> URL {
        URL(string: "http://\(credentials ? "\(Self.user):\(password)@" : "")127.0.0.1:\(port)")!
    }

    /// Starts tinyproxy; `authenticated`: it wants ``user`` and ``password`` (basic auth).
    static func start(authenticated: Bool = false) async throws -> ForwardProxy {
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestFailure("tinyproxy is not installed at \(path): run the README's test command, which installs it")
        }
        let folder = try makeTemporaryDirectory()
        var lastLog = ""
        for _ in 0..<5 {
            let port = try NginxServer.freePort()
            let log = folder.appendingPathComponent("tinyproxy-\(port).log")
            let config = """
                Port \(port)
                Listen 127.0.0.1
                Timeout 60
                LogFile "\(log.path)"
                LogLevel Info
                MaxClients 200
                Allow 127.0.0.1
                \(authenticated ? "BasicAuth \(user) \(password)" : "")
                """
            let configURL = folder.appendingPathComponent("tinyproxy-\(port).conf")
            try config.write(to: configURL, atomically: true, encoding: .utf8)
            let process = try ChildProcess(path, ["-d", "-c", configURL.path])
            // Listening once it logs its main loop; a port another process took makes it exit.
            for _ in 0..<1000 {
                lastLog = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                if lastLog.contains("Accepting connections") || !process.isRunning { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            if process.isRunning, lastLog.contains("Accepting connections") {
                return ForwardProxy(folder: folder, port: port, process: process)
            }
            process.signal(SIGKILL)
            _ = await process.exited()
        }
        try? FileManager.default.removeItem(at: folder)
        throw TestFailure("tinyproxy did not start: \(lastLog)")
    }

    /// The requests the proxy took so far, as its log gives them: `GET http://host:port/path HTTP/1.1`
    /// for plain HTTP, `CONNECT host:port HTTP/1.1` for a tunnel.
    func requests() -> [String] {
        let log = folder.appendingPathComponent("tinyproxy-\(port).log")
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            guard let start = line.range(of: "Request (")?.upperBound,
                let separator = line[start...].range(of: "): ")
            else { return nil }
            return String(line[separator.upperBound...])
        }
    }

    /// Stops tinyproxy and removes its files, on a thread of its own (``ServerStops``): called from a
    /// test's `defer`, it does not hold one of Swift concurrency's threads while the proxy exits.
    func stop() {
        ServerStops.shared.run { [process, folder] in
            process.signal(SIGTERM)
            process.wait()
            try? FileManager.default.removeItem(at: folder)
        }
    }
}
