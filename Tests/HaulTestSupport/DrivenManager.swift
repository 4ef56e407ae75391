import Dispatch
import FoundationEssentials
import Testing

@testable import Haul
@testable import HaulIO

/// A manager whose loop the test drives by hand, as NIOEmbedded's `EmbeddedEventLoop` and
/// AsyncHTTPClient's `MockConnectionPool` let their tests do: no loop thread (the test runs its
/// turns: ``run()``), a clock that moves only when the test moves it (``advance(by:)``: stalls,
/// retries and their back-off, checkpoints), and a server the test plays (``ScriptedServer``: every
/// connection arrives there; the test reads each request and writes the answer it chooses). The
/// manager, its scheduler, transfers, disk lanes and journal are the real ones; so is libcurl, which
/// parses what the test writes. What a test sees is what a caller sees: the download's state,
/// progress and events, the files and the journal's listings.
final class DrivenManager {
    let clock = LoopClock.manual()
    let directory: URL
    let server: ScriptedServer
    let manager: DownloadManager
    /// Requests taken from the server and not yet handed to the test.
    private var arrived: [ScriptedRequest] = []

    /// A manager with the test configuration (``DownloadManager/Configuration/forTests(bufferSize:)``),
    /// a state directory in a fresh temporary folder, and what `configure` changes.
    ///
    /// - Parameter folder: the folder of an earlier driven manager (shut down keeping its files):
    ///   its state directory and files, as a process started again finds them.
    init(in folder: URL? = nil, _ configure: (inout DownloadManager.Configuration) -> Void = { _ in }) throws {
        directory = try folder ?? makeTemporaryDirectory()
        server = try ScriptedServer(path: directory.path + "/server.sock")
        var configuration = DownloadManager.Configuration.forTests()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.retryDelay = .seconds(1)
        configure(&configuration)
        manager = try DownloadManager(
            configuration: configuration,
            drivenBy: DrivenLoop(clock: clock, unixSocketPath: server.path)
        )
    }

    /// A driven manager that splits a file over `connections` (segments of at least 64 KiB, the
    /// configuration's floor), in `folder` when given (``init(in:_:)``).
    static func segmented(_ connections: Int = 2, in folder: URL? = nil) throws -> DrivenManager {
        try DrivenManager(in: folder) {
            $0.connectionsPerFile = connections
            $0.minimumSegmentSize = 64 * 1024
        }
    }

    /// A file in the test's folder.
    func file(_ name: String) -> URL { directory.appendingPathComponent(name) }

    /// A URL of the scripted server (any host reaches it).
    func url(_ path: String) -> URL { URL(string: "http://files.test\(path)")! }

    /// Runs the loop until it is quiet (``Reactor/run(limit:)``); a loop still busy after a minute
    /// is recorded as a failure.
    func run(sourceLocation: SourceLocation = #_sourceLocation) {
        if !manager.reactor.run() {
            Issue.record("the driven loop was still busy after a minute", sourceLocation: sourceLocation)
        }
    }

    /// What the loop waits for now, for a failure's message: curl's timer, the timers on the manual
    /// clock, work off the loop, the connections and what the server's side of each has left.
    var loopReport: String {
        let reactor = manager.reactor
        let now = DispatchTime.now().uptimeNanoseconds
        let curl = reactor.curlTimerDue.map { "\((Int64($0) - Int64(now)) / 1_000_000) ms" } ?? "none"
        let timers = reactor.virtualTimers.map { ($0.due &- clock.uptimeNanoseconds) / 1_000_000 }
        let connections = server.connections.map { "#\($0.number) closed \($0.isClosed) peer closed \($0.peerClosed)" }
        return
            "curl's timer in \(curl), timers in \(timers) ms, off the loop \(reactor.delegate?.awaitsWorkOffLoop ?? false), connections \(connections)"
    }

    /// Moves the clock by `duration`, running each timer due on the way, then runs until quiet.
    func advance(by duration: Duration, sourceLocation: SourceLocation = #_sourceLocation) {
        if !manager.reactor.advance(by: duration) {
            Issue.record("the driven loop was still busy after a minute", sourceLocation: sourceLocation)
        }
    }

    /// Every request that arrived since the last look, oldest connection first.
    func requests(sourceLocation: SourceLocation = #_sourceLocation) -> [ScriptedRequest] {
        run(sourceLocation: sourceLocation)
        arrived += server.pendingRequests()
        defer { arrived = [] }
        return arrived
    }

    /// Starts the download of `path` to the file `name` of the test's folder.
    func download(_ path: String, to name: String? = nil, _ change: (inout DownloadRequest) -> Void = { _ in })
        throws -> Download
    {
        var request = DownloadRequest(
            url: url(path),
            destination: file(name ?? String(path.split(separator: "/").last ?? "file"))
        )
        change(&request)
        return try manager.download(request)
    }

    /// Answers `request` with the first `sent` bytes of `body` (announced whole, with `headers`),
    /// then cuts the connection: an attempt that ends mid-body.
    func cut(
        _ request: ScriptedRequest,
        status: Int = 200,
        _ headers: [(String, String)] = [],
        body: ArraySlice<UInt8>,
        after sent: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        answer(
            request,
            status: status,
            headers,
            body: Array(body.prefix(sent)),
            length: body.count,
            closing: true,
            sourceLocation: sourceLocation
        )
    }

    /// Moves the clock past `download`'s wait before its next attempt (its `waitingToRetry` state's
    /// delay, and the millisecond the retry timer rounds it up to), then runs until quiet.
    func advancePastRetry(of download: Download, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let delay = retryDelay(of: download, sourceLocation: sourceLocation) else { return }
        advance(by: delay + .milliseconds(1), sourceLocation: sourceLocation)
    }

    /// Serves `download` until it ends: each round passes its retry's wait (when it waits), moves
    /// the clock by `step` (a split needs time to measure a connection), and answers each request
    /// that arrived with `serve`. At most `rounds` rounds: one still running after them is left to
    /// the test's expectations on its state.
    func serve(
        _ download: Download,
        rounds: Int = 8,
        step: Duration = .zero,
        _ serve: (ScriptedRequest) throws -> Void
    ) rethrows {
        for _ in 0..<rounds where !download.state.isFinal {
            if download.stateCase == .waitingToRetry { advancePastRetry(of: download) }
            if step > .zero { advance(by: step) }
            for request in requests() { try serve(request) }
        }
    }

    /// How long `download` waits before its next attempt (its `waitingToRetry` state's delay).
    func retryDelay(of download: Download, sourceLocation: SourceLocation = #_sourceLocation) -> Duration? {
        guard case .waitingToRetry(_, let delay) = download.state else {
            Issue.record(
                "not waiting to retry: \(download.state), \(download.progress.bytesReceived) bytes; \(loopReport)",
                sourceLocation: sourceLocation
            )
            return nil
        }
        return delay
    }

    /// The bytes of the file `name` in the test's folder (empty when there is none).
    func bytes(of name: String) -> [UInt8] {
        (try? Data(contentsOf: file(name))).map { [UInt8]($0) } ?? []
    }

    /// A caller's pause, resume or cancel (the forms that do not wait: the test runs the loop that
    /// carries them out), then a run until quiet.
    func pause(_ download: Download, sourceLocation: SourceLocation = #_sourceLocation) {
        download.pause()
        run(sourceLocation: sourceLocation)
    }

    func resume(_ download: Download, sourceLocation: SourceLocation = #_sourceLocation) {
        download.resume()
        run(sourceLocation: sourceLocation)
    }

    func cancel(_ download: Download, sourceLocation: SourceLocation = #_sourceLocation) {
        download.cancel()
        run(sourceLocation: sourceLocation)
    }

    /// Whether the file `name` holds exactly `bytes` (a failure prints no arrays of bytes).
    func holds(_ name: String, _ bytes: [UInt8]) -> Bool { self.bytes(of: name) == bytes }

    /// Expects `download` to have failed with `code` and left no file at `name`.
    func expectFailed(
        _ download: Download,
        _ code: DownloadError.Code,
        leavingNo name: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(download.stateCase == .failed, sourceLocation: sourceLocation)
        #expect(download.stateError?.code == code, sourceLocation: sourceLocation)
        #expect(!exists(name), sourceLocation: sourceLocation)
    }

    /// Whether the file `name` exists in the test's folder.
    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: file(name).path) }

    /// The next request to arrive (after running the loop).
    func nextRequest(sourceLocation: SourceLocation = #_sourceLocation) throws -> ScriptedRequest {
        run(sourceLocation: sourceLocation)
        arrived += server.pendingRequests()
        guard !arrived.isEmpty else {
            throw ScriptedServerError("no request arrived (connections: \(server.connections.count))")
        }
        return arrived.removeFirst()
    }

    /// Writes `bytes` on `connection`, running the loop whenever the socket is full (the manager
    /// reads meanwhile), then runs until quiet. Unless `all`, a manager that closes the connection
    /// (a request it ended: a segment whole, a pause) ends the writing: returns how many it took.
    @discardableResult
    func send(
        _ bytes: [UInt8],
        on connection: ScriptedConnection,
        all: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> Int {
        var sent = 0
        var stuck = 0
        while sent < bytes.count {
            guard let wrote = connection.write(bytes[sent...]) else {
                if all {
                    Issue.record(
                        "the manager closed the connection at \(sent) of \(bytes.count) bytes",
                        sourceLocation: sourceLocation
                    )
                }
                break
            }
            sent += wrote
            stuck = wrote == 0 ? stuck + 1 : 0
            guard stuck < 10_000 else {
                Issue.record(
                    "the manager stopped reading at \(sent) of \(bytes.count) bytes",
                    sourceLocation: sourceLocation
                )
                break
            }
            run(sourceLocation: sourceLocation)
        }
        run(sourceLocation: sourceLocation)
        return sent
    }

    /// Answers `request`: its status line, `headers`, a `Content-Length` of `length` (the body's
    /// unless given; `nil` header when `length` is negative), and `body`; then closes the
    /// connection when `closing`, and runs until quiet. `all`: see ``send(_:on:all:sourceLocation:)``.
    func answer(
        _ request: ScriptedRequest,
        status: Int = 200,
        _ headers: [(String, String)] = [],
        body: [UInt8] = [],
        length: Int? = nil,
        closing: Bool = false,
        all: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        let declared = length ?? body.count
        if declared >= 0 { head += "Content-Length: \(declared)\r\n" }
        head += "\r\n"
        send(Array(head.utf8) + body, on: request.connection, all: all, sourceLocation: sourceLocation)
        if closing {
            request.connection.close()
            run(sourceLocation: sourceLocation)
        }
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 206: "Partial Content"
        case 301, 302, 307, 308: "Moved"
        case 404: "Not Found"
        case 412: "Precondition Failed"
        case 416: "Range Not Satisfiable"
        case 500...599: "Server Error"
        default: "Status"
        }
    }

    /// Shuts the manager down (its loop runs to its end here) and removes the folder, unless
    /// `keepingFiles` (a restart: ``init(in:_:)``).
    func shutdown(keepingFiles: Bool = false) async {
        await manager.shutdown()
        if !keepingFiles { try? FileManager.default.removeItem(at: directory) }
    }
}

extension Array where Element == UInt8 {
    /// `count` bytes that differ from one place to the next (a body whose splice would show).
    static func pattern(_ count: Int, seed: UInt8 = 0) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 / 251 &+ Int(seed)) }
    }
}

/// A state's case without its values, for tests that step through a download's states.
enum StateCase: Equatable, CustomStringConvertible {
    case queued, connecting, receiving, paused, completed, failed, waitingToRetry, cancelled

    init(_ state: DownloadState) {
        switch state {
        case .queued: self = .queued
        case .connecting: self = .connecting
        case .receiving: self = .receiving
        case .paused: self = .paused
        case .completed: self = .completed
        case .failed: self = .failed
        case .waitingToRetry: self = .waitingToRetry
        case .cancelled: self = .cancelled
        }
    }

    var description: String {
        switch self {
        case .queued: "queued"
        case .connecting: "connecting"
        case .receiving: "receiving"
        case .paused: "paused"
        case .completed: "completed"
        case .failed: "failed"
        case .waitingToRetry: "waitingToRetry"
        case .cancelled: "cancelled"
        }
    }
}

extension Download {
    /// Its state's case.
    var stateCase: StateCase { StateCase(state) }

    /// The error of a failed or retrying state.
    var stateError: DownloadError? {
        switch state {
        case .failed(let error), .waitingToRetry(let error, _): error
        default: nil
        }
    }
}

extension DownloadEvent {
    /// The event's case without its values: "connecting", "progress", "waitingToRetry", …
    var caseName: String {
        switch self {
        case .queued: "queued"
        case .connecting: "connecting"
        case .receiving: "receiving"
        case .progress: "progress"
        case .restarted: "restarted"
        case .waitingToRetry: "waitingToRetry"
        case .warning: "warning"
        case .switchedURL: "switchedURL"
        case .paused: "paused"
        case .completed: "completed"
        case .failed: "failed"
        case .cancelled: "cancelled"
        }
    }
}

extension DownloadEvents.AsyncIterator {
    /// The events buffered for this reader, up to the final one, of a download that reached its
    /// end (a reader of one still running would wait for the loop, which nobody turns while the
    /// test waits). Make the reader right after the download starts: a later one gets the events
    /// before it only within the early window, which is real time.
    mutating func namesToTheEnd() async -> [String] {
        var names: [String] = []
        while let event = await next() { names.append(event.caseName) }
        return names
    }
}
