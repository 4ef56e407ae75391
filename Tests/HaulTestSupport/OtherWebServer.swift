import Foundation
import Glibc

/// A real web server other than nginx (Debian's Apache httpd or lighttpd), started by a test on a
/// free loopback port, serving the files the test makes: their own ETags, `206` and
/// `Content-Range`, and their own reading of `If-Range`, which Haul's resumes must agree with. The
/// access log records, per request, the path, status, body bytes and the Range / If-Range headers.
final class OtherWebServer: @unchecked Sendable {
    // @unchecked Sendable: every stored property is immutable; `ChildProcess` guards its own state.
    enum Kind: String, Sendable, CaseIterable, CustomStringConvertible {
        case apache, lighttpd
        var description: String { rawValue }
        var path: String { self == .apache ? "/usr/sbin/apache2" : "/usr/sbin/lighttpd" }
    }

    struct LogEntry: Equatable {
        var path: String
        var status: Int
        var range: String
        var ifRange: String
    }

    let kind: Kind
    let folder: URL
    let root: URL
    let port: Int
    private let process: ChildProcess

    private init(kind: Kind, folder: URL, port: Int, process: ChildProcess) {
        self.kind = kind
        self.folder = folder
        self.root = folder.appendingPathComponent("www")
        self.port = port
        self.process = process
    }

    /// `http://127.0.0.1:PORT/path`.
    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)/\(path)")! }

    /// Writes a file of `size` pseudo-random bytes (``NginxServer/bytes(count:seed:)``), last
    /// modified `age` seconds ago (Apache calls the ETag of a file modified in the last second weak,
    /// and a file modified in the future has only weak validators: a negative `age`).
    @discardableResult
    func makeFile(_ name: String, size: Int, seed: UInt64, age: Int = 60) throws -> Data {
        let data = NginxServer.bytes(count: size, seed: seed)
        let file = root.appendingPathComponent(name)
        let staged = root.appendingPathComponent(".\(name).new")
        try data.write(to: staged)
        let modified = time(nil) - age
        var times = [timespec(tv_sec: modified, tv_nsec: 0), timespec(tv_sec: modified, tv_nsec: 0)]
        guard utimensat(AT_FDCWD, staged.path, &times, 0) == 0 else { throw TestFailure("utimensat: errno \(errno)") }
        // A new file under the name, as a deployment replaces one: another inode, another ETag.
        guard rename(staged.path, file.path) == 0 else { throw TestFailure("rename: errno \(errno)") }
        return data
    }

    /// Starts the server; throws (with its error log) if it does not come up.
    static func start(_ kind: Kind) async throws -> OtherWebServer {
        precondition(sweptOnce)
        let made = try TestServerFolder(kind: kind.rawValue, executable: kind.path)
        let (folder, root, marker) = (made.folder, made.root, made.marker)
        // Apache's children run as www-data: they must reach the files.
        chmod(folder.path, 0o755)
        chmod(root.path, 0o755)
        chmod(root.appendingPathComponent(marker).path, 0o644)
        var lastError = ""
        for _ in 0..<5 {
            let port = try NginxServer.freePort()
            let (arguments, errorLog) = try configure(kind, folder: folder, port: port)
            let process = try ChildProcess(kind.path, arguments, stderr: errorLog)
            if await NginxServer.waitUntilListening(port: port, process: process, marker: marker) {
                return OtherWebServer(kind: kind, folder: folder, port: port, process: process)
            }
            process.signal(SIGKILL)
            await process.exited()
            lastError = (try? String(contentsOfFile: errorLog, encoding: .utf8)) ?? ""
        }
        try? FileManager.default.removeItem(at: folder)
        throw TestFailure("\(kind) did not start: \(lastError)")
    }

    /// Stops the servers, and removes the folders, of test processes that died without stopping
    /// theirs (``sweepServersOfDeadTestProcesses(kind:)``). Once per test process.
    private static let sweptOnce: Bool = {
        for kind in Kind.allCases { sweepServersOfDeadTestProcesses(kind: kind.rawValue) }
        return true
    }()

    /// Writes the server's configuration for `port`; returns its command line and its error log.
    private static func configure(_ kind: Kind, folder: URL, port: Int) throws -> ([String], String) {
        let root = folder.appendingPathComponent("www").path
        let log = folder.appendingPathComponent("access.log").path
        let errorLog = folder.appendingPathComponent("error-\(port).log").path
        let config = folder.appendingPathComponent("\(kind)-\(port).conf")
        switch kind {
        case .apache:
            let modules = "/usr/lib/apache2/modules"
            try """
            ServerRoot "\(folder.path)"
            ServerName 127.0.0.1
            Listen 127.0.0.1:\(port)
            LoadModule mpm_event_module \(modules)/mod_mpm_event.so
            LoadModule authz_core_module \(modules)/mod_authz_core.so
            LoadModule mime_module \(modules)/mod_mime.so
            User www-data
            Group www-data
            TypesConfig /etc/mime.types
            PidFile "\(folder.path)/apache.pid"
            Mutex file:\(folder.path) default
            ErrorLog "\(errorLog)"
            LogFormat "%U %>s |%{Range}i|%{If-Range}i|" haul
            CustomLog "\(log)" haul
            DocumentRoot "\(root)"
            <Directory "\(root)">
              Require all granted
            </Directory>
            """.write(to: config, atomically: true, encoding: .utf8)
            return (["-f", config.path, "-DFOREGROUND"], errorLog)
        case .lighttpd:
            try """
            server.document-root = "\(root)"
            server.port = \(port)
            server.bind = "127.0.0.1"
            server.errorlog = "\(errorLog)"
            server.modules = ("mod_accesslog")
            accesslog.filename = "\(log)"
            accesslog.format = "%U %s |%{Range}i|%{If-Range}i|"
            mimetype.assign = (".bin" => "application/octet-stream")
            """.write(to: config, atomically: true, encoding: .utf8)
            return (["-D", "-f", config.path], errorLog)
        }
    }

    /// The requests logged so far for `path` (`/name`), in the order they ended; the servers log a
    /// request once it ends.
    func requests(to path: String) -> [LogEntry] {
        let text = (try? String(contentsOf: folder.appendingPathComponent("access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            // `PATH STATUS |RANGE|IF-RANGE|`; both servers write a `"` in a value as `\"`.
            let parts = line.replacingOccurrences(of: "\\\"", with: "\"").split(
                separator: "|",
                omittingEmptySubsequences: false
            )
            let fields = parts[0].split(separator: " ")
            guard fields.count >= 2, fields[0] == path, let status = Int(fields[1]), parts.count >= 3 else {
                return nil
            }
            return LogEntry(path: String(fields[0]), status: status, range: String(parts[1]), ifRange: String(parts[2]))
        }
    }

    /// ``requests(to:)`` once at least `count` are logged (or after 10 s, whatever is there): a
    /// request a client dropped is logged when the server notices.
    func requests(to path: String, atLeast count: Int) async -> [LogEntry] {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            let entries = requests(to: path)
            if entries.count >= count || ContinuousClock.now >= deadline { return entries }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Stops the server and removes its files, on a thread of its own (``ServerStops``).
    func stop() {
        ServerStops.shared.run { [process, folder] in
            process.signal(SIGTERM)
            process.wait()
            try? FileManager.default.removeItem(at: folder)
        }
    }
}
