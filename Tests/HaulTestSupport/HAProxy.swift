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
    /// The self-signed certificate (PEM) of its HTTPS port, when started with `tls`.
    let certificate: URL?

    private init(port: Int, process: ChildProcess, folder: URL, certificate: URL?) {
        self.port = port
        self.process = process
        self.folder = folder
        self.certificate = certificate
    }

    /// Starts HAProxy on a free loopback port in front of `backends` (loopback ports), round-robin;
    /// returns once a request for `probe` goes through it. `tls`: the port is HTTPS (a self-signed
    /// certificate for 127.0.0.1, ``certificate``) offering HTTP/2 and HTTP/1.1 (ALPN), each stream
    /// a request to a backend over HTTP/1.1: an HTTP/2 front for a server of the test's own.
    static func start(backends: [Int], probe: String, tls: Bool = false) async throws -> HAProxy {
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestFailure("haproxy is not installed at \(path): run the README's test command, which installs it")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("haul-haproxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let certificate = folder.appendingPathComponent("cert.pem")
        let key = folder.appendingPathComponent("key.pem")
        let combined = folder.appendingPathComponent("combined.pem")
        if tls {
            try await SelfSignedCertificate.make(certificate: certificate, key: key)
            try (try Data(contentsOf: certificate) + Data(contentsOf: key)).write(to: combined)
        }
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
                    bind 127.0.0.1:\(port)\(tls ? " ssl crt \(combined.path) alpn h2,http/1.1" : "")
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
                if tls
                    ? await answersOverTLS(port: port, path: probe, certificate: certificate)
                    : NginxServer.statusLine(port: port, path: probe)?.contains(" 200 ") == true
                {
                    return HAProxy(port: port, process: process, folder: folder, certificate: tls ? certificate : nil)
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            process.signal(SIGKILL)
            _ = await process.exited()
        }
        let log = (try? String(contentsOf: folder.appendingPathComponent("stderr"), encoding: .utf8)) ?? ""
        throw TestFailure("haproxy did not start: \(log)")
    }

    /// Whether `https://127.0.0.1:PORT/path` answers 200 (curl, trusting `certificate`).
    private static func answersOverTLS(port: Int, path: String, certificate: URL) async -> Bool {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent(
            "haul-haproxy-probe-\(UUID().uuidString)"
        )
        defer { try? FileManager.default.removeItem(at: output) }
        guard
            let curl = try? ChildProcess(
                "/usr/bin/curl",
                [
                    "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", certificate.path,
                    "https://127.0.0.1:\(port)\(path)",
                ],
                stdout: output.path
            )
        else { return false }
        guard await curl.exited() == 0 else { return false }
        return (try? String(contentsOf: output, encoding: .utf8)) == "200"
    }

    /// `http://127.0.0.1:PORT/path`, or `https:` when started with `tls`.
    func url(_ path: String) -> URL {
        URL(string: "\(certificate == nil ? "http" : "https")://127.0.0.1:\(port)/\(path)")!
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
