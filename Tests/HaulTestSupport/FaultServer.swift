import Foundation
import Glibc

/// An HTTP/1.1 server of our own, in the test process, that misbehaves on purpose. A thread accepts
/// on a free loopback port and a thread serves each connection (one request, then `Connection:
/// close`). Every route serves a file of pseudo-random bytes (``body(size:version:)``) and supports
/// `Range: bytes=N-` with `If-Range` (every version has its own strong ETag and Last-Modified), unless
/// misbehaving is its point:
///
/// - `/file/SIZE`: behaves.
/// - `/keepalive-close/SIZE`: behaves, but says nothing of closing the connection, which it closes
///   after the answer (as an idle keep-alive connection is closed by its server).
/// - `/drop/N/SIZE`: every response ends (connection closed) after N body bytes.
/// - `/stall/N/SIZE`: the first response goes silent after N body bytes; later ones behave.
/// - `/busy/STATUS/TIMES/SECONDS/SIZE`: the first TIMES requests get STATUS with `Retry-After: SECONDS`.
/// - `/norange/SIZE`: ignores Range: always 200 with the whole file.
/// - `/norange-drop/N/SIZE`: ignores Range; the first response ends (connection closed) after N body bytes.
///   `/plain-norange-drop/N/SIZE` the same with no validator; `/changing-norange/N/SIZE` and
///   `/plain-norange-changing/N/SIZE` with another version at each request.
/// - `/endless`: a 200 with no length whose body never ends (until the client closes, or 1 GiB).
/// - `/badrange/SIZE`: answers a range request with 206 and a Content-Range starting at 0.
/// - `/badrange-drop/N/SIZE`: the same, and every response ends (connection closed) after N body bytes.
/// - `/short/SIZE`: the first response announces SIZE bytes and sends half, then closes.
/// - `/lying/SIZE`: ignores Range, and every response announces 10 bytes more than the SIZE it sends.
/// - `/changing/N/SIZE`: each request gets another version (ETag and bytes); the first ends after N.
/// - `/changing-stall/N/SIZE`: each request gets another version; the first goes silent after N.
/// - `/loop`: redirects to itself.
/// - `/to-ftp`: redirects to an `ftp://` URL.
/// - `/to-file`: redirects to a `file://` URL.
/// - `/mute/SIZE`: the first request gets no answer at all (not even a status line); later ones behave.
/// - `/drip/CHUNK/MILLISECONDS/SIZE`: CHUNK bytes every MILLISECONDS.
/// - `/delay/MILLISECONDS/SIZE`: every answer waits MILLISECONDS before its head (a load test's known
///   time to first byte). `/slow-first/MILLISECONDS/SIZE`: only the first request to the path does.
/// - `/status/CODE`: that status, with a short body.
/// - `/empty`: no answer at all, every time: the connection closes once the request is read.
/// - `/capped-plain/CAP/SIZE`: every answer holds at most CAP bytes (a 206 for a range of them), with
///   no ETag and no Last-Modified.
/// - `/plain/N/SIZE`: no ETag, no Last-Modified; the first response ends after N body bytes.
/// - `/plain-changing/N/SIZE`: the same, and each request gets another version of the same size.
/// - `/plain-drop/N/SIZE`: no ETag, no Last-Modified; every response ends after N body bytes.
/// - `/chunked/N/SIZE`: a body of no announced length (`Transfer-Encoding: chunked`) with a strong
///   ETag, as dynamic content is sent; ignores Range; the first response ends after N body bytes
///   (without the last chunk).
/// - `/weak-changing/N/SIZE`: only a weak ETag; each request another version; the first ends after N.
/// - `/dated/N/SIZE`: only a Last-Modified, decades before the `Date` sent (strong: an `If-Range` with it
///   is honoured); the first response ends after N.
/// - `/dated-fresh-changing/N/SIZE`: only a Last-Modified equal to the `Date` sent (weak); each
///   request another version; the first ends after N.
/// - `/expire/N/SIZE`: a link that expires: the first response ends after N body bytes, every later
///   request gets 403. `/file/SIZE` serves the same file (same bytes, same ETag).
/// - `/impostor/SIZE`: another file of the same size (version 2's bytes), with no validator, that
///   honours Range whatever If-Range says.
/// - `/twoversions/SIZE`: two backends behind one port, as a load balancer spreads requests: odd
///   requests get version 1, even ones version 2 (same size, their own ETags), at 3.2 MB/s each.
/// - `/etag-ignored/N/SIZE`: a CDN that answers a range with an ETag `If-Range` by the whole file
///   (200, the same ETag) but honours a date `If-Range` or none; its Last-Modified is strong (a `Date`
///   is sent). The first response ends after N. `/etag-ignored-nodate/N/SIZE`: the same without a
///   `Date` (its Last-Modified alone is not strong).
/// - `/stall-segments/SIZE`: at 3.2 MB/s per answer; the first request with a range goes silent
///   after 64 KiB (one connection of a segmented download stalls).
/// - `/etag-ignored-slow/SIZE`: the same CDN, whole answers at 3.2 MB/s (segments start meanwhile).
/// - `/relabel/N/SIZE`: the first response ends after N; the second answers the resume with a 206 of
///   version 2 (another ETag), whatever If-Range says; the third is an error page as `200 OK
///   text/html` with no ETag (``errorPage``); later ones serve version 2.
/// - `/sametag/CUTS/N/SIZE`: a broken origin that repeats one strong ETag (`"same"`) over other
///   bytes: ignores Range, the k-th request gets version k, and the first CUTS answers end after k×N.
/// - `/etag-kept/N/K/SIZE`: a file changed under one strong ETag (`"same"`), on a server that
///   answers a range with an ETag `If-Range` by the whole file and honours a plain one: the first
///   response (version 1) ends after N; later ones serve version 2, whose first K bytes are version 1's.
/// - `/cut-head/SIZE`: the first answer is a status line and one header, then the connection
///   closes before the head's empty line (libcurl 7.88 takes that for a whole answer with no body);
///   later ones behave.
/// - `/gate/N/SIZE`: every answer, ranged or not, sends N body bytes and then holds until the test
///   calls ``openGate()`` (an answer begun after that is not held): a download that must still be
///   running when a test looks, however late a loaded machine looks, without a rate chosen to be slow.
/// - `/gate-at/N/SIZE`: the same hold at byte N of the file, for an answer from 0 and for a resume
///   that starts at or before N alike (a client's retry after a stall is held there too).
/// Ranges are `bytes=N-` or `bytes=A-B`.
final class FaultServer: @unchecked Sendable {
    // @unchecked Sendable: mutable state is guarded by `lock`; `listener` and `port` are immutable.

    /// A request as the server saw it.
    struct Request: Equatable {
        var path: String
        var range: String?
        var ifRange: String?
        /// Status and body bytes actually sent.
        var status: Int
        var bytesSent: Int
        /// When its head was read.
        var arrival = ContinuousClock.now
        /// When the client closed a silent answer's connection (`/stall-segments/`).
        var closedAt: ContinuousClock.Instant?
        /// The view it was asked of (the path's first part, taken out of ``path``); "" for none.
        var namespace = ""
    }

    /// Every request served so far (this view's, for a view), in order of arrival.
    var allRequests: [Request] {
        let namespace = self.namespace ?? ""
        return core.lock.withLock { core.served.filter { $0.namespace == namespace } }
    }

    let port: Int
    private let listener: Int32
    let lock = NSLock()
    private var counts: [String: Int] = [:]
    private var served: [Request] = []
    /// Open connections, with the view each was asked of once its head is read.
    var connections: [Int32: String] = [:]
    private var stopped = false
    /// Its entry in the ``Watchdog``, until ``stop()`` (a server of one's own; a view's is its view's).
    var watched: Int?
    var isStopped: Bool { view?.hasEnded ?? lock.withLock { stopped } }
    /// The paths whose first ranged request went silent (`/stall-segments/`), views' folders included.
    private var stalledOnce: Set<String> = []
    /// `/gate/`'s: held answers wait on it until their view's gate is open (or the view or server stops).
    private let gate = NSCondition()
    private var gatesOpen: Set<String> = []
    /// Set as the server stops: no answer is held any more.
    private var everyGateOpen = false
    /// A view's: the shared server it is a view of, and the view, whose folder is the first part of
    /// its URLs' paths (``FaultServer+Shared.swift``). nil for a server of one's own.
    let shared: FaultServer?
    let view: SharedServerView?
    var namespace: String? { view?.folder }
    /// The server that serves: the shared one for a view, itself otherwise.
    var core: FaultServer { shared ?? self }

    private init(listener: Int32, port: Int) {
        self.listener = listener
        self.port = port
        shared = nil
        view = nil
    }

    /// A view of `shared`, with a folder of its own.
    init(viewOf shared: FaultServer) {
        listener = -1
        port = shared.port
        self.shared = shared
        view = SharedServerView(of: "fault server :\(shared.port)")
    }

    /// Starts listening on 127.0.0.1 on a free port: a server of the test's own. `watched`: whether
    /// it is the running test's (the shared one is nobody's).
    static func start(watched: Bool = true) throws -> FaultServer {
        let (socketFD, port) = try Descriptors.loopbackListener()
        let server = FaultServer(listener: socketFD, port: port)
        if watched {
            server.watched = Watchdog.shared.started("fault server :\(port)") { [weak server] in
                !(server?.isStopped ?? true)
            }
        }
        let thread = Thread { server.acceptLoop() }
        thread.start()
        return server
    }

    func url(_ path: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)/\(namespace.map { "\($0)/" } ?? "")\(path)")!
    }

    /// The bytes every route serves for a file of `size` (version 1; `/changing` serves 1, 2, 3…).
    static func body(size: Int, version: Int = 1) -> Data {
        NginxServer.bytes(count: size, seed: UInt64(1000 + version))
    }

    /// The requests served so far whose path is `path`, in order.
    func requests(to path: String) -> [Request] {
        allRequests.filter { $0.path == path }
    }

    /// Lets every answer of `/gate/` held so far go on, and every later one run through (a view's
    /// only, for a view).
    func openGate() {
        core.openGate(namespace ?? "")
    }

    func openGate(_ namespace: String) {
        gate.withLock {
            gatesOpen.insert(namespace)
            gate.broadcast()
        }
    }

    /// Until ``openGate()`` (or ``stop()``) was called for the view `namespace` ("" for none).
    func waitForGate(_ namespace: String) {
        gate.withLock {
            while !gatesOpen.contains(namespace) && !everyGateOpen { gate.wait() }
        }
    }

    /// Stops accepting and closes every connection (a silent one included). A view's stop closes
    /// the connections asked of it; the shared server goes on.
    func stop() {
        if let shared, let view {
            if view.end() { shared.closeConnections(of: view.folder) }
            return
        }
        defer {
            // A held answer's thread goes on to a shut-down socket, and ends.
            gate.withLock {
                everyGateOpen = true
                gate.broadcast()
            }
        }
        lock.withLock {
            stopped = true
            if let watched { Watchdog.shared.stopped(watched) }
            // Under the lock: a connection still in the set is not closed yet (its thread takes it
            // out, under the lock, before closing it), so its number is not another test's socket.
            for connection in connections.keys { shutdown(connection, Int32(SHUT_RDWR)) }
        }
        // Shut down, not closed: the accept loop closes it as it ends, so that no accept of its
        // reaches a number that another test's socket took meanwhile.
        shutdown(listener, Int32(SHUT_RDWR))
    }

    // MARK: serving

    private func acceptLoop() {
        defer { close(listener) }
        while true {
            let connection = Descriptors.acceptClosingOnExec(listener)
            if connection < 0 {
                if errno == EINTR { continue }
                return
            }
            let accepted = lock.withLock { () -> Bool in
                guard !stopped else { return false }
                connections[connection] = ""
                return true
            }
            guard accepted else {
                close(connection)
                return
            }
            let thread = Thread { [self] in
                serve(connection)
                lock.withLock { _ = connections.removeValue(forKey: connection) }
                close(connection)
            }
            thread.start()
        }
    }

    private func serve(_ connection: Int32) {
        guard let head = readHead(connection) else { return }
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let requestLine = lines.first?.split(separator: " ") ?? []
        guard requestLine.count >= 2 else { return }
        var path = String(requestLine[1])
        // A view's folder, the path's first part, is taken out: routes and logs see the rest.
        var namespace = ""
        if path.hasPrefix("/" + SharedServerView.folderPrefix), let end = path.dropFirst().firstIndex(of: "/") {
            namespace = String(path[path.index(after: path.startIndex)..<end])
            path = String(path[end...])
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces
            )
        }
        var request = Request(
            path: path,
            range: headers["range"],
            ifRange: headers["if-range"],
            status: 0,
            bytesSent: 0,
            namespace: namespace
        )
        // Logged in the order requests arrive (a silent response ends long after the next request).
        // Counted per view: each test's first request to a path is its first.
        let key = namespace + path
        let (count, index) = lock.withLock { () -> (Int, Int) in
            connections[connection] = namespace
            counts[key, default: 0] += 1
            served.append(request)
            return (counts[key]!, served.count - 1)
        }
        respond(to: &request, number: count, index: index, on: connection)
        lock.withLock { served[index] = request }
    }

    /// Routes one request; `number` counts the requests to this path, from 1.
    private func respond(to request: inout Request, number: Int, index: Int, on connection: Int32) {
        // A query string only makes URLs distinct; routing ignores it.
        let route = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        let parts = route.split(separator: "/").map(String.init)
        let numbers = parts.dropFirst().compactMap { Int($0) }
        let size = numbers.last ?? 0
        switch parts.first ?? "" {
        case "file":
            sendFile(size: size, request: &request, index: index, on: connection)
        case "keepalive-close":
            sendFile(size: size, request: &request, index: index, on: connection, announcesClose: false)
        case "drop" where numbers.count == 2:
            sendFile(size: size, request: &request, index: index, on: connection, limit: numbers[0])
        case "stall" where numbers.count == 2:
            sendFile(size: size, request: &request, index: index, on: connection, limit: number == 1 ? numbers[0] : nil)
            if number == 1 { waitForClose(connection) }
        case "busy" where numbers.count == 4:
            if number <= numbers[1] {
                sendStatus(
                    numbers[0],
                    extra: "Retry-After: \(numbers[2])\r\n",
                    request: &request,
                    index: index,
                    on: connection
                )
            } else {
                sendFile(size: size, request: &request, index: index, on: connection)
            }
        case "norange-drop" where numbers.count == 2, "chunked" where numbers.count == 2,
            "plain-norange-drop" where numbers.count == 2, "changing-norange" where numbers.count == 2,
            "plain-norange-changing" where numbers.count == 2:
            // Ignores ranges; cuts its first answer at N. "plain": no validator; "changing": the file
            // is a new version at each request.
            let kind = parts.first ?? ""
            sendFile(
                size: size,
                version: kind.contains("changing") ? number : 1,
                request: &request,
                index: index,
                on: connection,
                limit: number == 1 ? numbers[0] : nil,
                honorsRange: false,
                validators: kind.hasPrefix("plain") ? .none : .strong,
                chunked: kind == "chunked"
            )
        case "mixed" where numbers.count == 3:
            // Two servers behind one name: the first answer is cut at N. Then one that ignores Range
            // answers (each answer cut at M) until it was asked once without If-Range (the client
            // concluded that Range is ignored, not If-Range); the other, which honours it, after.
            let (path, namespace) = (request.path, request.namespace)
            let askedPlainly = lock.withLock {
                served[..<index].contains {
                    $0.path == path && $0.namespace == namespace && $0.range != nil && $0.ifRange == nil
                }
            }
            let ignoring = number > 1 && !askedPlainly
            sendFile(
                size: size,
                request: &request,
                index: index,
                on: connection,
                limit: number == 1 ? numbers[0] : ignoring ? numbers[1] : nil,
                honorsRange: !ignoring
            )
        case "sametag" where numbers.count == 3:
            sendFile(
                size: size,
                version: number,
                request: &request,
                index: index,
                on: connection,
                limit: number <= numbers[0] ? number * numbers[1] : nil,
                honorsRange: false,
                sameTag: true
            )
        case "endless":
            sendEndless(request: &request, index: index, on: connection)
        case "norange":
            sendFile(size: size, request: &request, index: index, on: connection, honorsRange: false)
        case "badrange":
            sendFile(size: size, request: &request, index: index, on: connection, rangeStartsAtZero: true)
        case "badrange-drop" where numbers.count == 2:
            sendFile(
                size: size,
                request: &request,
                index: index,
                on: connection,
                limit: numbers[0],
                rangeStartsAtZero: true
            )
        case "lying":
            sendFile(size: size, request: &request, index: index, on: connection, honorsRange: false, extraLength: 10)
        case "bighead":
            sendStatus(
                200,
                extra: "X-Padding: \(String(repeating: "a", count: 200_000))\r\n",
                request: &request,
                index: index,
                on: connection
            )
        case "plain-drop" where numbers.count == 2:
            sendFile(size: size, request: &request, index: index, on: connection, limit: numbers[0], validators: .none)
        case "capped-plain" where numbers.count == 2:
            sendFile(size: size, request: &request, index: index, on: connection, cap: numbers[0], validators: .none)
        case "capped" where numbers.count == 2:
            sendFile(size: size, request: &request, index: index, on: connection, cap: numbers[0])
        case "twolengths":
            sendFile(size: size, request: &request, index: index, on: connection, secondLength: size / 2)
        case "short-then-cut":
            // Half the file, then nothing of the rest: each later answer is cut before its body.
            sendFile(size: size, request: &request, index: index, on: connection, limit: number == 1 ? size / 2 : 0)
        case "short":
            sendFile(size: size, request: &request, index: index, on: connection, limit: number == 1 ? size / 2 : nil)
        case "changing" where numbers.count == 2:
            sendFile(
                size: size,
                version: number,
                request: &request,
                index: index,
                on: connection,
                limit: number == 1 ? numbers[0] : nil
            )
        case "changing-stall" where numbers.count == 2:
            sendFile(
                size: size,
                version: number,
                request: &request,
                index: index,
                on: connection,
                limit: number == 1 ? numbers[0] : nil
            )
            if number == 1 { waitForClose(connection) }
        case "loop":
            let location = request.namespace.isEmpty ? "/loop" : "/\(request.namespace)/loop"
            sendStatus(302, extra: "Location: \(location)\r\n", request: &request, index: index, on: connection)
        case "to-ftp":
            sendStatus(
                302,
                extra: "Location: ftp://127.0.0.1:\(port)/file\r\n",
                request: &request,
                index: index,
                on: connection
            )
        case "to-file":
            sendStatus(302, extra: "Location: file:///etc/passwd\r\n", request: &request, index: index, on: connection)
        case "mute":
            if number == 1 {
                waitForClose(connection)
            } else {
                sendFile(size: size, request: &request, index: index, on: connection)
            }
        case "delay" where numbers.count == 2:
            // The server's own time to answer, which a load test's time to first byte must show.
            usleep(useconds_t(numbers[0]) * 1000)
            sendFile(size: size, request: &request, index: index, on: connection)
        case "slow-first" where numbers.count == 2:
            if number == 1 { usleep(useconds_t(numbers[0]) * 1000) }
            sendFile(size: size, request: &request, index: index, on: connection)
        case "drip" where numbers.count == 3:
            sendFile(size: size, request: &request, index: index, on: connection, drip: (numbers[0], numbers[1]))
        case let route where numbers.count == 2 && Self.validatorRoutes.contains(route):
            let validators: Validators =
                switch route {
                case "plain", "plain-changing": .none
                case "weak-changing": .weakTag
                case "dated": .lastModified(fresh: false)
                default: .lastModified(fresh: true)
                }
            sendFile(
                size: size,
                version: route.hasSuffix("-changing") ? number : 1,
                request: &request,
                index: index,
                on: connection,
                limit: number == 1 ? numbers[0] : nil,
                validators: validators
            )
        case "expire" where numbers.count == 2:
            if number == 1 {
                sendFile(size: size, request: &request, index: index, on: connection, limit: numbers[0])
            } else {
                sendStatus(403, extra: "", request: &request, index: index, on: connection)
            }
        case "twoversions":
            // 64 KiB every 20 ms per connection: slow enough that the other connections start.
            sendFile(
                size: size,
                version: number % 2 == 1 ? 1 : 2,
                request: &request,
                index: index,
                on: connection,
                drip: (64 * 1024, 20)
            )
        case "stall-segments":
            // The first ranged request goes silent after 64 KiB; every answer drips at 3.2 MB/s.
            let ranged = request.range != nil
            let key = request.namespace + request.path
            let silent = ranged && lock.withLock { !stalledOnce.contains(key) }
            if silent { _ = lock.withLock { stalledOnce.insert(key) } }
            sendFile(
                size: size,
                request: &request,
                index: index,
                on: connection,
                limit: silent ? 64 * 1024 : nil,
                drip: (64 * 1024, 20)
            )
            if silent {
                waitForClose(connection)
                request.closedAt = .now
            }
        case "etag-ignored-slow":
            sendFile(
                size: size,
                request: &request,
                index: index,
                on: connection,
                drip: (64 * 1024, 20),
                validators: .strongWithDate,
                ignoresEntityTagIfRange: true
            )
        case "etag-ignored" where numbers.count == 2, "etag-ignored-nodate" where numbers.count == 2:
            sendFile(
                size: size,
                request: &request,
                index: index,
                on: connection,
                limit: number == 1 ? numbers[0] : nil,
                validators: parts[0] == "etag-ignored" ? .strongWithDate : .strong,
                ignoresEntityTagIfRange: true
            )
        case "etag-kept" where numbers.count == 3:
            // A file changed under the same strong ETag, on a server that ignores an ETag If-Range.
            sendFile(
                size: size,
                version: number == 1 ? 1 : 2,
                request: &request,
                index: index,
                on: connection,
                limit: number == 1 ? numbers[0] : nil,
                ignoresEntityTagIfRange: true,
                sameTag: true,
                sharedPrefix: number == 1 ? 0 : numbers[1]
            )
        case "relabel" where numbers.count == 2:
            switch number {
            case 1: sendFile(size: size, request: &request, index: index, on: connection, limit: numbers[0])
            case 2:
                sendFile(size: size, version: 2, request: &request, index: index, on: connection, ignoresIfRange: true)
            case 3: sendErrorPage(request: &request, index: index, on: connection)
            default: sendFile(size: size, version: 2, request: &request, index: index, on: connection)
            }
        case "impostor":
            sendFile(
                size: size,
                version: 2,
                request: &request,
                index: index,
                on: connection,
                validators: .none,
                ignoresIfRange: true
            )
        case "cut-head" where numbers.count == 1:
            guard number == 1 else { return sendFile(size: size, request: &request, index: index, on: connection) }
            request.status = 200
            note(request, at: index)
            _ = write(Data("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n".utf8), to: connection)
        case "gate" where numbers.count == 2:
            sendFile(size: size, request: &request, index: index, on: connection, gate: numbers[0])
        case "gate-at" where numbers.count == 2:
            sendFile(size: size, request: &request, index: index, on: connection, gateAt: numbers[0])
        case "empty":
            // No answer at all: the connection closes after the request (curl: an empty reply).
            break
        case "status" where numbers.count == 1:
            sendStatus(numbers[0], extra: "", request: &request, index: index, on: connection)
        default:
            sendStatus(404, extra: "", request: &request, index: index, on: connection)
        }
    }

    /// Logs what a response's head said, as soon as it is sent (a body may take long after).
    func note(_ request: Request, at index: Int) {
        lock.withLock { served[index] = request }
    }

}

/// Runs `body` with a ``FaultServer`` and a temporary directory, both gone afterwards. The server is
/// a view of the process's shared one unless `own` says why the test needs its own
/// (``startFaultServerAndDirectory(own:)``).
func withFaultServer<T>(own: String? = nil, _ body: (FaultServer, URL) async throws -> T) async throws -> T {
    let (server, directory) = try startFaultServerAndDirectory(own: own)
    defer { stop(server, directory) }
    return try await body(server, directory)
}

/// A ``FaultServer`` and a temporary directory, for a test that ends with
/// `defer { stop(server, directory) }` (as ``startServerAndDirectory(inMemory:own:)`` for nginx).
/// The server is a view of the process's shared one (``FaultServer/shared()``) unless `own` says
/// why the test needs one of its own: it counts the server's sockets, writes URLs by hand from its
/// port, or needs a host of its own.
func startFaultServerAndDirectory(own: String? = nil) throws -> (FaultServer, URL) {
    let server = own == nil ? FaultServer.shared() : try FaultServer.start()
    do {
        return (server, try makeTemporaryDirectory())
    } catch {
        server.stop()
        throw error
    }
}

/// Stops the fault server (it does not block: its threads end on their own) and removes the directory.
func stop(_ server: FaultServer, _ directory: URL) {
    server.stop()
    try? FileManager.default.removeItem(at: directory)
}
