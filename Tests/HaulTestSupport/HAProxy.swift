import Foundation
import Glibc

/// A real HAProxy (Debian's), started by a test in front of servers of its own choosing: one port,
/// requests spread round-robin over the backends, each request on its own (HAProxy balances HTTP
/// requests, not connections), as a load balancer in front of two servers does.
final class HAProxy: @unchecked Sendable {
    // @unchecked Sendable: every stored property is immutable; `ChildProcess` guards its own state.
    static let path = "/usr/sbin/haproxy"
    let port: Int
    private let process: ChildProcess
    private let folder: URL

    private init(port: Int, process: ChildProcess, folder: URL) {
        self.port = port
        self.process = process
        self.folder = folder
    }

    /// Starts HAProxy on a free loopback port in front of `backends` (loopback ports), round-robin;
    /// returns once a request for `probe` goes through it.
    static func start(backends: [Int], probe: String) async throws -> HAProxy {
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestFailure("haproxy is not installed at \(path): run the README's test command, which installs it")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("haul-haproxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for _ in 0..<5 {
            let port = try NginxServer.freePort()
            let servers = backends.enumerated().map { "    server b\($0.offset) 127.0.0.1:\($0.element)" }
            let config = """
                global
                    maxconn 1024
                defaults
                    mode http
                    timeout connect 5s
                    timeout client 60s
                    timeout server 60s
                frontend front
                    bind 127.0.0.1:\(port)
                    default_backend back
                backend back
                    balance roundrobin
                \(servers.joined(separator: "\n"))

                """
            let file = folder.appendingPathComponent("haproxy.cfg")
            try config.write(to: file, atomically: true, encoding: .utf8)
            let process = try ChildProcess(
                path,
                ["-db", "-f", file.path],
                stderr: folder.appendingPathComponent("stderr").path
            )
            for _ in 0..<500 {
                guard process.isRunning else { break }
                if NginxServer.statusLine(port: port, path: probe)?.contains(" 200 ") == true {
                    return HAProxy(port: port, process: process, folder: folder)
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            process.signal(SIGKILL)
            _ = await process.exited()
        }
        let log = (try? String(contentsOf: folder.appendingPathComponent("stderr"), encoding: .utf8)) ?? ""
        throw TestFailure("haproxy did not start: \(log)")
    }

    /// `http://127.0.0.1:PORT/path`.
    func url(_ path: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)/\(path)")!
    }

    /// Stops HAProxy (it keeps nothing worth a graceful stop) and removes its files, on a thread of
    /// its own (``ServerStops``), as ``stop(_:_:)`` does for nginx.
    func stop() {
        ServerStops.shared.run { [process, folder] in
            process.signal(SIGKILL)
            process.wait()
            try? FileManager.default.removeItem(at: folder)
        }
    }
}
