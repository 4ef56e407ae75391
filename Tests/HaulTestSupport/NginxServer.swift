import Foundation
import Glibc

/// A real nginx, started by a test on a free loopback port, serving files the test generates.
///
/// Locations: `/` (plain), `/slow/` (512 KB/s per connection), `/slowest/` (256 KB/s), `/norange/`
/// (ignores Range: `max_ranges 0`, 512 KB/s), `/redirect/x` (302 to `/x`), `/loop` (redirects to itself), `/chunked/` (no Content-Length,
/// chunked, no ranges), `/gated/` (a request without Range: 1 MiB at once, then 1 KB/s; with one: at
/// full speed), `/paced/` (the same at 16 KB/s), `/held/` (every request, ranged too: 1 MiB at once,
/// then 1 KB/s). The access log records, per request, the URI, status,
/// body bytes sent and the Range / If-Range headers.
final class NginxServer: @unchecked Sendable {
    // @unchecked Sendable: every stored property is immutable; `ChildProcess` guards its own state.
    let root: URL
    /// The password of user `alice` for `/private/` (basic auth).
    static let password = "s3cret-pw"
    /// The bearer token `/bearer/` wants, the `session` cookie `/cookie/` wants, the `X-Api-Key`
    /// `/apikey/` wants: secrets the tests look for in every file and log Haul writes.
    static let bearer = "t0ken-s3cret-4f1c"
    static let cookie = "c00kie-s3cret-9a2e"
    static let apiKey = "k3y-s3cret-77d0"
    /// The page `/busy-page/` sends as `200 OK` past two connections.
    static let busyPage = "<html><body>Too many connections; try again later.</body></html>"
    let prefix: URL
    let port: Int
    private let process: ChildProcess
    /// A view's (``NginxServer+Shared.swift``): its folder under the shared server's root holds its
    /// files, and is in its URLs and its log lines. nil for a server of the test's own.
    let view: SharedServerView?
    var namespace: String? { view?.folder }
    /// Where a view's lines start in the shared access log (0 for a server of one's own).
    let logStart: UInt64

    struct LogEntry: Equatable {
        var uri: String
        var status: Int
        var bytesSent: Int64
        var range: String
        var ifRange: String
        /// `HTTP/1.1` or `HTTP/2.0`.
        var protocolName: String = ""
        /// nginx's serial number of the connection that carried the request.
        var connection: Int = 0
        /// The request's `User-Agent`.
        var userAgent: String = ""
        /// When the request ended (seconds since 1970, to the millisecond) and how long it took.
        var endedAt: Double = 0
        var duration: Double = 0
        var startedAt: Double { endedAt - duration }
    }

    static let nginxPath = "/usr/sbin/nginx"

    private init(
        root: URL,
        prefix: URL,
        port: Int,
        tlsPort: Int,
        certificate: URL?,
        process: ChildProcess,
        view: SharedServerView? = nil,
        logStart: UInt64 = 0
    ) {
        self.root = root
        self.prefix = prefix
        self.port = port
        self.tlsPort = tlsPort
        self.certificate = certificate
        self.process = process
        self.view = view
        self.logStart = logStart
    }

    /// A view of `shared` for the running test: a folder of its own under the shared root.
    convenience init(viewOf shared: NginxServer) throws {
        let view = SharedServerView(of: "nginx")
        let root = shared.root.appendingPathComponent(view.folder)
        do {
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        } catch {
            _ = view.end()
            throw error
        }
        let log = shared.prefix.appendingPathComponent("logs/access.log").path
        let logStart = (try? FileManager.default.attributesOfItem(atPath: log)[.size] as? UInt64) ?? 0
        self.init(
            root: root,
            prefix: shared.prefix,
            port: shared.port,
            tlsPort: 0,
            certificate: nil,
            process: shared.process,
            view: view,
            logStart: logStart
        )
    }

    /// The HTTPS port, when started with `tls`.
    let tlsPort: Int
    /// The self-signed certificate (PEM) of the HTTPS port, when started with `tls`.
    let certificate: URL?

    /// `https://127.0.0.1:TLSPORT/path`.
    func httpsURL(_ path: String) -> URL {
        URL(string: "https://127.0.0.1:\(tlsPort)/\(path)")!
    }

    /// Starts nginx; throws (with nginx's error log) if it does not come up.
    /// With `tls`, the same site is also served over HTTPS (HTTP/2 offered) on ``tlsPort``, with a
    /// self-signed certificate for 127.0.0.1 made by `openssl` (``certificate``).
    /// `watched`: whether the process is the running test's (a shared server is nobody's).
    static func start(tls: Bool = false, watched: Bool = true) async throws -> NginxServer {
        precondition(sweptOnce)
        let made = try TestServerFolder(kind: "nginx", executable: nginxPath)
        let (prefix, root, marker) = (made.folder, made.root, made.marker)
        try FileManager.default.createDirectory(
            at: prefix.appendingPathComponent("logs"),
            withIntermediateDirectories: true
        )
        var lastError = ""
        let certificate = prefix.appendingPathComponent("cert.pem")
        let key = prefix.appendingPathComponent("key.pem")
        if tls {
            try await SelfSignedCertificate.make(certificate: certificate, key: key)
        }
        for _ in 0..<5 {
            let port = try freePort()
            let tlsPort = tls ? try freePort() : 0
            let tlsListener =
                tls
                ? "listen 127.0.0.1:\(tlsPort) ssl http2; ssl_certificate \(certificate.path); ssl_certificate_key \(key.path);"
                : ""
            let config = """
                daemon off;
                master_process off;
                worker_processes 1;
                worker_rlimit_nofile 16384;
                user root;
                error_log \(prefix.path)/logs/error.log;
                pid \(prefix.path)/nginx.pid;
                events { worker_connections 4096; }
                http {
                    log_format haul '$request_uri $status $body_bytes_sent "$http_range" "$http_if_range" "$server_protocol" $connection "$http_user_agent" $msec $request_time';
                    access_log \(prefix.path)/logs/access.log haul;
                    client_body_temp_path \(prefix.path)/tmp; proxy_temp_path \(prefix.path)/tmp;
                    fastcgi_temp_path \(prefix.path)/tmp; uwsgi_temp_path \(prefix.path)/tmp; scgi_temp_path \(prefix.path)/tmp;
                    keepalive_requests 100000;
                    # /gated/: a first request (no Range) gets 1 MiB at once, then 1 KB/s, so a test's
                    # pause, cancel or shutdown lands before it ends however loaded the machine (a test
                    # task waited 25 s for a turn on two busy cores); a resume (with Range) is not
                    # limited, so the test does not wait for it. /paced/: the same at 16 KB/s, for a
                    # test that lets a first request run to its end.
                    map $http_range $haul_gated_rate { "" 1k; default 0; }
                    map $http_range $haul_paced_rate { "" 16k; default 0; }
                    map $http_range $haul_uneven_rate { "" 8m; default 1m; }
                    map $http_x_speed $haul_crawl_rate { fast 0; default 64k; }
                    # The connection limits count per client and, on the shared server, per test
                    # (the view's folder, the path's second part: /twoconn/t-…/x).
                    map $request_uri $haul_view { ~^/(?:twoconn|busy-page)/(\(SharedServerView.folderPrefix)[^/]+)/ $1; default ""; }
                    limit_conn_zone "$binary_remote_addr$haul_view" zone=haul_per_client:1m;
                    limit_conn_zone "$binary_remote_addr$haul_view" zone=haul_busy_page:1m;
                    server {
                        listen 127.0.0.1:\(port);
                        \(tlsListener)
                        root \(root.path);
                        location /slow/ { alias \(root.path)/; limit_rate 512k; }
                        location /slowest/ { alias \(root.path)/; limit_rate 256k; }
                        location /perconn/ { alias \(root.path)/; limit_rate 1m; }
                        location /uneven/ { alias \(root.path)/; limit_rate $haul_uneven_rate; }
                        location /crawl/ { alias \(root.path)/; limit_rate_after 256k; limit_rate $haul_crawl_rate; }
                        location /norange/ { alias \(root.path)/; max_ranges 0; limit_rate 512k; }
                        location /gated/ { alias \(root.path)/; limit_rate_after 1m; limit_rate $haul_gated_rate; }
                        location /paced/ { alias \(root.path)/; limit_rate_after 1m; limit_rate $haul_paced_rate; }
                        # /held/: every request, ranged or not, 1 MiB at once, then 1 KB/s: a download
                        # over several connections still runs when a test looks, however late.
                        location /held/ { alias \(root.path)/; limit_rate_after 1m; limit_rate 1k; }
                        location /gated-norange/ {
                            alias \(root.path)/; max_ranges 0; limit_rate_after 1m; limit_rate $haul_gated_rate;
                        }
                        # /private/: basic auth, user alice, password s3cret-pw (NginxServer.password).
                        location /private/ {
                            alias \(root.path)/; auth_basic "haul"; auth_basic_user_file \(prefix.path)/htpasswd;
                        }
                        # /precompressed/x: x.gz with Content-Encoding: gzip, asked for or not.
                        location /precompressed/ { alias \(root.path)/; gzip_static always; }
                        location /redirect/ { rewrite ^/redirect/(.*)$ /$1 redirect; }
                        # /to-http/x: to the same file over plain HTTP, on the same host (a downgrade).
                        location /to-http/ { rewrite ^/to-http/(.*)$ http://127.0.0.1:\(port)/$1 redirect; }
                        location /noetag/ { alias \(root.path)/; etag off; limit_rate 1m; }
                        # /busy-page/: past two connections at once, an HTML error page as 200 OK
                        # (no ETag), as overloaded servers and load balancers send (NginxServer.busyPage).
                        location /busy-page/ {
                            alias \(root.path)/; limit_conn haul_busy_page 2; limit_conn_status 503; limit_rate 1m;
                            error_page 503 =200 /busy.html;
                        }
                        location = /busy.html { internal; default_type text/html; return 200 "\(Self.busyPage)"; }
                        location /twoconn/ { alias \(root.path)/; limit_conn haul_per_client 2; limit_conn_status 503; limit_rate 1m; }
                        location /to-crawl/ { rewrite ^/to-crawl/(.*)$ /crawl/$1 redirect; }
                        # Headers (NginxServer.bearer, .cookie, .apiKey): 401 without the right one.
                        location /bearer/ {
                            alias \(root.path)/; if ($http_authorization != "Bearer \(Self.bearer)") { return 401; }
                        }
                        location /bearer-gated/ {
                            alias \(root.path)/; limit_rate_after 1m; limit_rate $haul_gated_rate;
                            if ($http_authorization != "Bearer \(Self.bearer)") { return 401; }
                        }
                        location /cookie/ { alias \(root.path)/; if ($cookie_session != "\(Self.cookie)") { return 401; } }
                        location /apikey/ { alias \(root.path)/; if ($http_x_api_key != "\(Self.apiKey)") { return 401; } }
                        # Content-Disposition: a plain name, RFC 5987 UTF-8 names, hostile ones.
                        location /cd/plain/ { alias \(root.path)/; add_header Content-Disposition 'attachment; filename="report.pdf"'; }
                        location /cd/gated/ {
                            alias \(root.path)/; limit_rate_after 1m; limit_rate $haul_gated_rate;
                            add_header Content-Disposition 'attachment; filename="gated-report.bin"';
                        }
                        location /cd/paced/ {
                            alias \(root.path)/; limit_rate_after 1m; limit_rate $haul_paced_rate;
                            add_header Content-Disposition 'attachment; filename="gated-report.bin"';
                        }
                        location /cd/utf8/ {
                            alias \(root.path)/;
                            add_header Content-Disposition "attachment; filename=\\"fallback.txt\\"; filename*=UTF-8''na%C3%AFve%20caf%C3%A9.txt";
                        }
                        location /cd/traversal/ { alias \(root.path)/; add_header Content-Disposition 'attachment; filename="../../escaped.txt"'; }
                        location /cd/absolute/ { alias \(root.path)/; add_header Content-Disposition 'attachment; filename="/etc/escaped.txt"'; }
                        location /cd/dotfile/ { alias \(root.path)/; add_header Content-Disposition 'attachment; filename=".bashrc"'; }
                        location /cd/control/ {
                            alias \(root.path)/; add_header Content-Disposition "attachment; filename*=UTF-8''bad%0Aname%00here%01.txt";
                        }
                        location /cd/dots/ { alias \(root.path)/; add_header Content-Disposition 'attachment; filename=".."'; }
                        location = /cd/redirected { return 302 /r/final-name.bin; }
                        location = / { default_type text/plain; return 200 "the root page\\n"; }
                        location /to-bearer/ { rewrite ^/to-bearer/(.*)$ /bearer/$1 redirect; }
                        # Another origin (localhost, not 127.0.0.1), which must get none of a request's headers.
                        location /to-other-origin/ { rewrite ^/to-other-origin/(.*)$ http://localhost:$server_port/clean/$1 redirect; }
                        location /clean/ {
                            alias \(root.path)/;
                            if ($http_authorization != "") { return 403; }
                            if ($http_cookie != "") { return 403; }
                            if ($http_x_api_key != "") { return 403; }
                            if ($http_x_tenant != "") { return 403; }
                        }
                        location = /loop { return 302 /loop; }
                        location /chunked/ {
                            alias \(root.path)/;
                            sub_filter_types *; sub_filter 'never-in-random-bytes' 'x'; sub_filter_once off;
                        }
                    }
                }
                """
            try "alice:{PLAIN}\(Self.password)\n".write(
                to: prefix.appendingPathComponent("htpasswd"),
                atomically: true,
                encoding: .utf8
            )
            let configURL = prefix.appendingPathComponent("nginx.conf")
            try config.write(to: configURL, atomically: true, encoding: .utf8)
            let process = try ChildProcess(
                nginxPath,
                ["-p", prefix.path, "-c", configURL.path, "-e", "\(prefix.path)/logs/error.log"],
                watched: watched
            )
            if await waitUntilListening(port: port, process: process, marker: marker) {
                return NginxServer(
                    root: root,
                    prefix: prefix,
                    port: port,
                    tlsPort: tlsPort,
                    certificate: tls ? certificate : nil,
                    process: process
                )
            }
            process.signal(SIGKILL)
            await process.exited()
            lastError =
                (try? String(contentsOf: prefix.appendingPathComponent("logs/error.log"), encoding: .utf8)) ?? ""
        }
        throw TestFailure("nginx did not start: \(lastError)")
    }

    /// Stops the nginx instances, and removes the folders, of test processes that died without
    /// stopping theirs (``sweepServersOfDeadTestProcesses(kind:)``). Once per test process.
    private static let sweptOnce: Bool = {
        sweepServersOfDeadTestProcesses(kind: "nginx")
        return true
    }()

    /// Stops nginx and removes its files.
    ///
    /// nginx without a master process can miss a SIGTERM that arrives just before it blocks in
    /// `epoll_wait` with no timer armed: a CI run hung here for ten minutes, nginx asleep with the
    /// signal handled. So the signal goes again each second until it exits, then SIGKILL.
    func stop() {
        guard namespace == nil else { return stopView() }
        let exited = DispatchSemaphore(value: 0)
        Thread { [process] in
            process.wait()
            exited.signal()
        }.start()
        for _ in 0..<5 {
            process.signal(SIGTERM)
            if exited.wait(timeout: .now() + 1) == .success {
                try? FileManager.default.removeItem(at: prefix)
                return
            }
        }
        process.signal(SIGKILL)
        exited.wait()
        try? FileManager.default.removeItem(at: prefix)
    }

    /// `http://127.0.0.1:PORT/path`.
    func url(_ path: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)/\(placed(path))")!
    }

    /// Writes a file of `size` pseudo-random bytes (seeded, so a test can make a different version).
    @discardableResult
    func makeFile(_ name: String, size: Int, seed: UInt64 = 1) throws -> Data {
        let data = Self.bytes(count: size, seed: seed)
        let url = root.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
        return data
    }

    /// The access log so far, the test's requests only. nginx writes each line when a request ends
    /// (for an aborted one, when it notices the client went away).
    func accessLog() -> [LogEntry] {
        let text = logText()
        return text.split(separator: "\n").compactMap { whole -> LogEntry? in
            guard let line = ownLine(whole) else { return nil }
            let quoted = line.split(separator: "\"", omittingEmptySubsequences: false)
            let fields = quoted[0].split(separator: " ")
            guard fields.count >= 3, let status = Int(fields[1]), let bytes = Int64(fields[2]) else { return nil }
            // Not the start's readiness probe: nginx logs it after answering, so a test that counted
            // the log at once could find it later among its own requests (seen under load).
            guard !fields[0].hasPrefix("/.ready-") else { return nil }
            return LogEntry(
                uri: String(fields[0]),
                status: status,
                bytesSent: bytes,
                range: quoted.count > 1 ? String(quoted[1]) : "",
                ifRange: quoted.count > 3 ? String(quoted[3]) : "",
                protocolName: quoted.count > 5 ? String(quoted[5]) : "",
                connection: quoted.count > 6 ? Int(quoted[6].trimmingCharacters(in: .whitespaces)) ?? 0 : 0,
                userAgent: quoted.count > 7 ? String(quoted[7]) : "",
                endedAt: quoted.count > 8 ? Double(quoted[8].split(separator: " ").first ?? "") ?? 0 : 0,
                duration: quoted.count > 8 ? Double(quoted[8].split(separator: " ").dropFirst().first ?? "") ?? 0 : 0
            )
        }
    }

    /// The logged requests for `uri` in the order they started, once at least `count` are logged (or
    /// after 10 s, whatever is there). nginx logs an aborted request only when it notices the client
    /// went away, which can come after the client saw its next request answered: the log's order is
    /// the order they ended.
    func requests(to uri: String, atLeast count: Int) async -> [LogEntry] {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        while true {
            let entries = accessLog().filter { $0.uri == uri }
            if entries.count >= count || clock.now >= deadline {
                // Each entry goes before those logged earlier that started at least 5 ms after it
                // (the log's times are in milliseconds); closer ones keep the log's order.
                var ordered: [LogEntry] = []
                for entry in entries {
                    let index = ordered.firstIndex { entry.startedAt + 0.005 < $0.startedAt } ?? ordered.count
                    ordered.insert(entry, at: index)
                }
                return ordered
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    static func bytes(count: Int, seed: UInt64) -> Data {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var data = Data(count: count)
        data.withUnsafeMutableBytes { buffer in
            let words = count / 8
            let pointer = buffer.baseAddress!
            for index in 0..<words {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                pointer.storeBytes(of: state, toByteOffset: index * 8, as: UInt64.self)
            }
            for index in (words * 8)..<count {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                buffer[index] = UInt8(truncatingIfNeeded: state)
            }
        }
        return data
    }

    static func freePort() throws -> Int {
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socketFD >= 0 else { throw TestFailure("socket() failed") }
        defer { close(socketFD) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(socketFD, pointer, length) == 0 && getsockname(socketFD, pointer, &length) == 0
            }
        }
        guard bound else { throw TestFailure("bind() failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Polls until this nginx answers 200 for its marker file (up to 10 s). A bare connect is not
    /// enough: another test's nginx may have taken the same free port first.
    /// Async: the test's thread (one of Swift concurrency's two here) is free for other tests meanwhile.
    static func waitUntilListening(port: Int, process: ChildProcess, marker: String) async -> Bool {
        for _ in 0..<1000 {
            guard process.isRunning else { return false }
            if statusLine(port: port, path: "/\(marker)")?.contains(" 200 ") == true { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    /// The status line of a GET on loopback, or nil when nothing answers.
    static func statusLine(port: Int, path: String) -> String? {
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socketFD >= 0 else { return nil }
        defer { close(socketFD) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return nil }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard send(socketFD, request, request.count, 0) == request.count else { return nil }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = recv(socketFD, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\r\n").first.map(String.init)
    }
}

/// A test set-up failure with a message.
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A fresh temporary directory, removed by the caller.
///
/// `inMemory` puts it on tmpfs (`/dev/shm`, when there is one): for the load tests, whose thousands of
/// files and syncs would otherwise contend with every other test for the disk.
func makeTemporaryDirectory(inMemory: Bool = false) throws -> URL {
    var isDirectory: ObjCBool = false
    let memory =
        inMemory && FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory)
        && isDirectory.boolValue
    let base = memory ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory
    let url = base.appendingPathComponent("haul-test-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// A test's nginx and scratch directory; pair with ``stop(_:_:)`` in a `defer`. Async: while nginx
/// starts, the test's thread (one of Swift concurrency's two here) runs other tests.
///
/// The server is a view of the process's shared nginx (its own folder, URLs and log lines:
/// ``NginxServer/shared()``) unless `own` says why the test needs one of its own: it counts the
/// server's connections or sockets, builds URLs by hand from the port, uses a location matched
/// exactly (`/loop`, `/`, `/cd/redirected`), or stops the server.
func startServerAndDirectory(inMemory: Bool = false, own: String? = nil) async throws -> (NginxServer, URL) {
    let server = try await own == nil ? NginxServer.shared() : NginxServer.start()
    do {
        return (server, try makeTemporaryDirectory(inMemory: inMemory))
    } catch {
        stop(server)
        throw error
    }
}

/// A test server's folder, made now: `haul-KIND-PID-UUID` in the temporary folder, the name
/// ``sweepServersOfDeadTestProcesses(kind:)`` finds it by once that process is gone, with its
/// document root `www` and there a marker file only this server serves (a port that answers
/// without it belongs to another server). Throws when the server's `executable` is not installed.
struct TestServerFolder {
    let folder: URL
    let root: URL
    let marker: String

    init(kind: String, executable: String) throws {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TestFailure(
                "\(kind) is not installed at \(executable): run the README's test command, which installs it"
            )
        }
        folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "haul-\(kind)-\(getpid())-\(UUID().uuidString)"
        )
        root = folder.appendingPathComponent("www")
        marker = ".ready-\(UUID().uuidString)"
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Data("ready".utf8).write(to: root.appendingPathComponent(marker))
    }
}

/// Stops the servers of `kind`, and removes their folders (``TestServerFolder``), that test
/// processes which died without stopping theirs (a crash, a kill) left in the temporary folder:
/// each folder is named after the process that made it, and each process whose command line names
/// the folder is its server's (Apache's workers too, which outlive their parent).
func sweepServersOfDeadTestProcesses(kind: String) {
    let prefix = "haul-\(kind)-"
    let temporary = FileManager.default.temporaryDirectory
    var orphans: [String] = []
    for name in (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? []
    where name.hasPrefix(prefix) {
        let parts = name.dropFirst(prefix.count).split(separator: "-", maxSplits: 1)
        guard parts.count == 2, let owner = pid_t(parts[0]), kill(owner, 0) != 0, errno == ESRCH else { continue }
        orphans.append(temporary.appendingPathComponent(name).path)
    }
    guard !orphans.isEmpty else { return }
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard let process = pid_t(entry),
            let commandLine = try? String(contentsOfFile: "/proc/\(entry)/cmdline", encoding: .utf8),
            orphans.contains(where: { commandLine.contains($0 + "/") })
        else { continue }
        kill(process, SIGKILL)
    }
    for folder in orphans { try? FileManager.default.removeItem(atPath: folder) }
}

/// Stops the server and removes the directory of ``startServerAndDirectory()``, on a thread of its
/// own: called from a test's `defer`, it returns at once instead of holding one of Swift
/// concurrency's two threads while nginx exits (up to seconds: ``NginxServer/stop()``). The test
/// process waits for every such stop before it exits (``ServerStops``).
func stop(_ server: NginxServer, _ directory: URL? = nil) {
    ServerStops.shared.run {
        server.stop()
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }
}

/// The stops of servers under way, each on a thread of its own; the process waits for them at exit,
/// so that no nginx outlives the tests.
final class ServerStops: Sendable {
    static let shared = ServerStops()
    private let group = DispatchGroup()

    private init() {
        atexit { ServerStops.shared.waitForAll() }
    }

    func run(_ work: @escaping @Sendable () -> Void) {
        group.enter()
        Thread { [group] in
            work()
            group.leave()
        }.start()
    }

    func waitForAll() { group.wait() }
}
