import CHaul
import Dispatch
import FoundationEssentials
import Glibc
import HaulIO
import HaulValues
import Logging
import Tracing

/// The loop thread's side of one admitted download, as AsyncHTTPClient's `RequestBag` is of one
/// request: it owns its state machine, its partial file (``FileSink``), its curl request and the
/// decision on each response, and performs the actions of its machine that concern them. The actions
/// that reach beyond it (pause, complete, retry, fail, cancel: slots, the queue, the disk lanes) are
/// returned to its owner, the ``Scheduler``, which performs them.
///
/// Exists from admission until the download pauses or ends; a queued download is only a journal row.
/// Loop thread only; the public ``Download`` talks to it through commands.
package final class Transfer {
    let download: LiveDownload
    /// Where its events go (its download's hub).
    let events: any DownloadEventSink
    let store: Journal
    let environment: TransferEnvironment
    /// The caller's context when it asked for the download: the parent of its attempts' spans.
    let serviceContext: ServiceContext?
    /// The current attempt's span (``startSpan()``), and the bytes received when it began.
    var span: (any Span)?
    var spanStartBytes: Int64 = 0
    /// Attempts begun in this admission.
    var attemptsStarted = 0
    /// The loop's clock (``LoopClock``): what stalls, speeds, splits and retries measure time by.
    var clock: LoopClock { environment.reactor.clock }
    /// When it was admitted (uptime nanoseconds): its duration's start.
    let admittedAt = DispatchTime.now().uptimeNanoseconds
    /// Its messages' logger: its request's (``DownloadRequest/logger``) or the manager's. Messages
    /// go through ``log(_:_:metadata:)``, which adds `haul.download.id` and `haul.url`.
    private let baseLogger: Logger

    /// Logs `message` with `metadata`, the download's id and, unless `metadata` names another, the
    /// URL in use (without credentials); nothing is built unless `level` is enabled (a transfer's
    /// metadata made for each download cost the loop even when nobody logs).
    func log(
        _ level: Logger.Level,
        _ message: @autoclosure () -> Logger.Message,
        metadata: @autoclosure () -> Logger.Metadata = [:]
    ) {
        guard baseLogger.logLevel <= level else { return }
        var all = metadata()
        all["haul.download.id"] = "\(id)"
        if all["haul.url"] == nil { all["haul.url"] = "\(urlForErrors)" }
        baseLogger.log(level: level, message(), metadata: all)
    }
    /// Where the download is in its life; the source of every decision.
    var machine: DownloadStateMachine
    /// The download's journal row as this transfer last wrote it or will write it.
    var record: JournalRow
    /// Its own request and the connection it goes over (``Connection``): the one every download
    /// has; a download over several connections has others (``segments``).
    private(set) lazy var own = Connection(transfer: self)
    /// The partial file (or the stream's sink), from the first request until the transfer is set
    /// aside or handed off: its own connection's sink, kept across its requests.
    var sink: FileSink? {
        get { own.sink }
        set { own.sink = newValue }
    }
    /// What the current request asked for and what its answer said; replaced with each request.
    var request = Request()
    /// Revalidating a complete file: the request is conditional, and a 304 keeps the destination.
    let revalidating: Bool
    /// The partial file's length when this attempt's first request was made: an attempt progressed
    /// only if it took the file past it (a restart from zero within the attempt does not count).
    var lengthAtAttemptStart: Int64?
    /// Where its row is in the journal's table (from the claim): the row's writes find it there.
    let rowID: Int64?
    var speed = SpeedMeter()
    var lastProgressAt: UInt64 = 0
    /// The headers its requests send (the manager's, with the download's over them): to the
    /// download's origin only (``Redirect``).
    var headers: [DownloadHeader]
    /// Redirects followed since the last request to the download's URL.
    var redirectsFollowed = 0
    /// Whether ``DownloadWarning/insecureRedirect(_:)`` was published (once per download).
    var warnedOfInsecureRedirect = false
    /// Its mirrors and moves, made only for a transfer that has mirrors or moves (most never do:
    /// 10,000 live transfers each kept a kilobyte more when these were stored inline).
    private var otherURLs: OtherURLs?

    /// What a transfer knows of its other URLs.
    final class OtherURLs {
        /// Every URL of a download with mirrors: the one in use, then the others in order.
        var urls: [URL] = []
        /// URLs that served another file than the partial's, which it does not use again.
        var dropped: Set<URL> = []
    }

    private var others: OtherURLs {
        if let otherURLs { return otherURLs }
        let made = OtherURLs()
        otherURLs = made
        return made
    }

    var urls: [URL] { otherURLs?.urls ?? [] }
    var droppedURLs: Set<URL> {
        get { otherURLs?.dropped ?? [] }
        set { others.dropped = newValue }
    }
    /// The stream its body goes to instead of a partial file (``StreamTarget``), for this process.
    let stream: StreamTarget?
    /// The request continues a file Haul did not download (``DownloadRequest/continuesExistingFile``):
    /// bytes on disk with no validator are proven by the overlap, as with `resumesWithoutValidator`.
    let provesByOverlap: Bool
    /// The folder its name must stay inside when the file is placed (``DownloadRequest/confinedTo``).
    let confinedTo: String?
    /// The watch on the stream's descriptor while the reader is behind (``Transfer+Stream``).
    var streamWatch: DescriptorWatch?
    /// What is called once the stream took the last bytes of a complete body.
    var streamFinishing: ((Result<Int64, DownloadError>) -> Void)?
    /// Its segments and other connections, while it is fetched over several (most never are).
    var segments: Segments?

    /// The transfer's own request beyond its connection's (``own``): what it asked for and what the
    /// answer said.
    struct Request {
        /// The partial file's length when the request was made: where the answer's new bytes go.
        var offset: Int64 = 0
        /// When it was made (uptime nanoseconds): the time to its first byte starts here.
        var startedAt = DispatchTime.now().uptimeNanoseconds
        /// The partial's bytes from the asked range's start (``Connection/rangeStart``: `offset`, or
        /// before it when an unvalidated resume checks the overlap, ``ResumePlan``) to `offset`,
        /// which the answer must repeat first.
        var overlap: [UInt8]?
        /// What the answer must repeat of the bytes the download holds before the decision on it
        /// goes to the machine (``OverlapCheck``): set from the decision until every repeated byte
        /// matched or one differed.
        var check: OverlapCheck? {
            get { checkBox?.value }
            set { checkBox = newValue.map { Boxed($0) } }
        }
        /// Why the request asks for the whole file although the partial holds bytes (nothing vouches
        /// for them): an answer from byte 0 replaces them.
        var restartReason: RestartReason?
        /// The answer's head, from the decision until the body is accepted (thousands of live
        /// transfers need not keep their heads).
        var head: ResponseHead? {
            get { headBox?.value }
            set { headBox = newValue.map { Boxed($0) } }
        }
        /// Where the accepted answer's body ends, when it is a range that stops before the end of the
        /// file (``ResponseDecision/rangeEnd(of:)``): reaching it asks for the next range.
        var rangeEnd: Int64?
        /// The answer's `Retry-After`, if it had one.
        var retryAfter: Duration?
        /// The answer is a redirect: its body is dropped, and the next request goes where it points
        /// once curl finished it (curl resolves the `Location` only then).
        var isRedirect = false
        /// Where it went (the download's URL, or where a redirect led), and whether the download's
        /// headers went too.
        var target: URL?
        var sendsHeaders = true
        /// The download's URL it asked (before any redirect): the one its answer's bytes come from,
        /// which the row takes once they are accepted (``followURL()``), whatever a caller asked
        /// for since.
        var asked: URL?
        // Set for a moment, or never: boxed, the two take 16 bytes of every live transfer instead
        // of hundreds (issue 44, (c)). Each set makes a new box, so a copy of a request never shares one.
        private var headBox: Boxed<ResponseHead>?
        private var checkBox: Boxed<OverlapCheck>?

        init(offset: Int64 = 0) {
            self.offset = offset
        }
    }

    /// A transfer of `request` (its row, and what this process keeps beyond it): its requests send
    /// the manager's headers with the request's over them; with mirrors, the URL in use is tried
    /// first, then the ones after it, round and round.
    package init(
        download: LiveDownload,
        request: TransferRequest,
        store: Journal,
        environment: TransferEnvironment,
        restarts: Int
    ) {
        let (record, mirrors) = (request.record, request.mirrors)
        self.serviceContext = request.context
        self.stream = request.stream
        self.provesByOverlap = request.provesByOverlap
        self.confinedTo = request.confinedTo
        environment.census.transfers.add(1, ordering: .relaxed)
        self.baseLogger = request.logger ?? environment.logger
        self.download = download
        self.events = download.hub
        self.store = store
        self.partialPath = store.partialPath(for: download.id)
        self.environment = environment
        let current = download.url
        var urls: [URL] = []
        if !mirrors.isEmpty {
            urls.append(current)
            let start = mirrors.firstIndex(of: current).map { $0 + 1 } ?? 0
            for mirror in mirrors[start...] + mirrors[..<start] where !urls.contains(mirror) { urls.append(mirror) }
            let others = OtherURLs()
            others.urls = urls
            self.otherURLs = others
        }
        self.machine = DownloadStateMachine(
            url: current.redactedString,
            failures: record.failures,
            restarts: restarts,
            retryLimit: environment.retryLimit,
            alternatives: urls.count - 1,
            refreshesURLs: environment.refreshesURLs,
            connectionRetryLimit: environment.connectionRetryLimit,
            answered: record.attempts > 0 || record.bytesCommitted > 0
        )
        self.record = record
        self.rowID = request.rowID
        self.revalidating = record.revalidate
        self.headers = DownloadHeader.merged(environment.defaultHeaders, request.headers ?? [])
    }

    /// Its requests send `headers` (a provider's or a refresh hook's), over the manager's.
    func send(headers: [DownloadHeader]) {
        self.headers = DownloadHeader.merged(environment.defaultHeaders, headers)
    }

    deinit { environment.census.transfers.subtract(1, ordering: .relaxed) }

    package var id: DownloadID { download.id }
    /// The largest body accepted: the manager's maximum, or a body in memory's own, whichever is less.
    var maximumSize: Int64? {
        guard let own = stream?.collector?.maximum else { return environment.maximumFileSize }
        return min(own, environment.maximumFileSize ?? own)
    }
    /// The error for a body over ``maximumSize``: `detail` says by how much; the error names the
    /// limit that was reached (a body in memory's own `maximumSize`, or the manager's).
    func tooLarge(_ detail: String) -> DownloadError {
        var error = DownloadError(code: .fileTooLarge, url: urlForErrors, detail: detail)
        if let own = stream?.collector?.maximum {
            error.exceededMaximumSizeArgument = own <= environment.maximumFileSize ?? own
        }
        return error
    }
    /// Whether its request's next answer is handed up (``SlotAction/answered(multiplexes:)``): set by
    /// the owner for a download whose host's HTTP/2 connections it grants.
    var reportsAnswer = false
    /// Its first answer, not taken yet: whether it came over HTTP/2, and how many sockets curl had
    /// opened by then (``Reactor/socketsOpened``: the ones opened later, for where a redirect
    /// leads, prove nothing of this host).
    private var firstAnswer: (multiplexes: Bool, socketsOpened: UInt64)?
    /// Whether its first answer sends it to another host (a redirect to a CDN): said up once curl
    /// let go of its stream here (``SlotAction/leftHost``).
    var leavesHost = false

    /// Its first answer, once (``SlotAction/answered``). The owner takes
    /// it when the action comes, or when the transfer stops, whichever is first (a small body can
    /// end in the loop turn it began, before the turn's handed actions are performed).
    package func takeAnswer() -> (multiplexes: Bool, socketsOpened: UInt64)? {
        defer { firstAnswer = nil }
        return firstAnswer
    }

    /// Its request's answer came over `easy` (`redirects`: a redirect with a Location): noted, and
    /// handed up, when the owner asked.
    func noteAnswer(_ easy: EasyHandle, redirects: Bool) {
        guard reportsAnswer else { return }
        reportsAnswer = false
        firstAnswer = (easy.responseHTTPVersion >= 2, environment.reactor.socketsOpened)
        // (A Location curl could not resolve leads nowhere new: the request fails there.)
        let target = redirects ? easy.redirectURL.flatMap { URL(string: $0)?.hostKey } : nil
        leavesHost = target.map { $0 != hostKey } ?? false
        environment.hand(.answered, from: self)
    }
    /// `host:port`, the key of per-host limits.
    package var hostKey: String { record.host.isEmpty ? download.url.hostKey : record.host }
    /// The partial file's path, made once (each use made it again: two strings per small download);
    /// `nil` for a body into a stream, memory or nothing (its row is in the journal in memory).
    let partialPath: String?
    var urlForErrors: String { machine.url }

    /// Bytes received so far, as progress.
    func progress() -> DownloadProgress {
        let received = segmentedBytes ?? sink?.committedLength ?? partialPath.flatMap(FilePath.fileLength) ?? 0
        return DownloadProgress(
            bytesReceived: received,
            totalBytes: record.totalBytes,
            bytesPerSecond: speed.bytesPerSecond,
            estimatedTimeRemaining: speed.estimatedTimeRemaining(received: received, total: record.totalBytes),
            connections: liveConnections
        )
    }

    /// The partial file's bytes worth resuming: a segmented download's map says; else its length.
    var bytesOnDisk: Int64 { segmentedBytes ?? partialPath.flatMap(FilePath.fileLength) ?? 0 }

    /// Takes every request of the transfer out of curl.
    func stopAll() {
        stopFetches()
        stopRequest()
        endSpan()
    }

    /// The same error, attributed to this download's URL.
    func attributed(_ error: DownloadError) -> DownloadError {
        var error = error
        error.url = urlForErrors
        return error
    }

    // MARK: inputs from the scheduler

    /// A slot is free: the first request goes out (or, `needsHeaders`, the header provider is asked
    /// first). Returns what the owner does (a failure to start, asking for headers).
    func admit(needsHeaders: Bool = false) -> SlotAction {
        // Revalidating a complete file: its answer, unless a 304, is the whole file again, never a
        // resume of a partial file left from before.
        if revalidating, let partialPath { unlink(partialPath) }
        return slotAction(for: perform(machine.admit(needsHeaders: needsHeaders)))
    }

    /// The user cancelled. A stream whose whole body waits for its reader (who may have gone: a
    /// reader that leaves cancels) ends cancelled too, rather than wait for a reader who never comes.
    func cancel() -> SlotAction {
        guard streamFinishing != nil else { return slotAction(for: perform(machine.cancel())) }
        streamFinishing = nil
        closeStreamWatch()
        return slotAction(for: perform(machine.cancelHandOver()))
    }

    /// Performs the actions that are the transfer's own (requests, bodies) and returns the others,
    /// which are its owner's.
    func perform(_ action: DownloadStateMachine.Action) -> DownloadStateMachine.Action {
        environment.reactor.assertOnLoop()
        switch action {
        case .none:
            return .none
        case .startRequest(let truncating):
            redirectsFollowed = 0
            return startRequest(truncating: truncating)
        case .tryNextURL(let cause):
            return moveToNextURL(after: cause)
        case .pause, .cancel, .received, .keepDestination, .fail, .retry, .refreshURL, .askForHeaders:
            return action
        }
    }

    /// Carries out what the machine said of a response's body (`nil`: nothing was decided yet, a
    /// redirect's body or an answer whose first bytes are compared first): written from here on,
    /// or refused (curl ends the request, and ``requestEnded(_:)`` says what follows).
    func take(_ action: DownloadStateMachine.BodyAction?) {
        guard case .accept(let total, let truncating, let restart) = action else { return }
        acceptBody(total: total, truncating: truncating, restart: restart)
    }
}
