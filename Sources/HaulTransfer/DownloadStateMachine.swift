import HaulValues

/// The life of one download, as a pure value: each input returns the action its owner performs.
///
/// ```
///            admit              head accepted          transfer ended        placed (or failed)
///   idle ───────────▶ connecting ───────────▶ receiving ───────────▶ finishing ───▶ done(completed | failed)
///    ▲                   │  ▲ ◀─────────────────────┤ a 206 whose range ended before the file
///    │                   │  │ head refused          │ (next range)
///    │ pause             ▼  │ (restart)             │ pause; the body could not be written
///    └──────────▶ paused ◀┴── closing ◀───────────┘
///   cancel from any state but finishing and done → done(cancelled); finishing is only cancelled
///     as a stream's hand-over whose reader left
///   a failure → done(failed); done is final
///   a failure another URL may not have (a status, the network) while the download has URLs it did
///   not try since it last progressed (mirrors), or one a fresh URL may fix (401, 403, 410, with a
///   refresh hook, once) → connecting (the next URL, or the hook's)
///   a transient failure (connecting, receiving, closing) while the retry budget lasts → idle (retry)
///   admit with headers whose values are not known (a restored download) → awaitingHeaders
///     → connecting (they arrived) or done(failed)
///   401, 403 or 410 with a refresh hook → awaitingFreshURL → connecting (a fresh URL), or as the
///     failure says when none comes (another URL, a retry, the end)
/// ```
///
/// A paused download leaves the loop (it is a journal row again; resuming queues the row, and a new
/// machine runs it), so `paused` only accepts a cancel. Inputs that a user may send at any moment
/// (pause, cancel) are ignored where they make no sense. Inputs that only Haul's own loop sends in a
/// fixed order (admit, response head, transfer ended) are checked with `preconditionFailure`.
struct DownloadStateMachine: Sendable {
    /// How many times one download may throw its partial away and ask again without a range, across
    /// its retries, before it makes progress again.
    static let maximumRestarts = 3

    private(set) var state: State = .idle
    /// Restarts from zero since the download last made progress (see ``transferEnded(_:progressed:)``).
    private(set) var restarts: Int
    /// Consecutive attempts that failed transiently without writing a byte.
    private(set) var failures: Int
    /// How many such attempts are retried before the download fails.
    let retryLimit: Int
    /// How many attempts that could not connect (refused, unreachable) are retried while no server
    /// ever answered this download: a wrong port or a host that is down fails at once, as curl and
    /// wget do, unless the caller asked for such retries.
    let connectionRetryLimit: Int
    /// Whether a server answered this download (now or in an earlier attempt or process).
    private(set) var answered: Bool
    /// The URL for errors this machine creates, credentials removed: the one requests go to.
    private(set) var url: String
    /// How many other URLs the download has (mirrors), and how many of them were tried since it
    /// last progressed.
    private(set) var alternatives: Int
    private(set) var alternativesTried = 0
    /// Whether a refresh hook can give fresh URLs, and whether it was asked since the download last
    /// progressed (once: a fresh URL that is refused too is not refreshed again).
    let refreshesURLs: Bool
    private(set) var refreshed = false
    /// The download goes on over one connection, whatever its settings allow: a server answered a
    /// range of it with the whole file, or its connections were answered with different versions of
    /// the file twice (two servers behind one name, each with its own).
    private(set) var overOneConnection = false
    /// How many times connections of this download were answered with different versions.
    private(set) var versionConflicts = 0
    /// Where the download moved after a failure (a mirror, a fresh URL), until that URL's answer
    /// is accepted (``URLMove``). Boxed: most downloads never move, and thousands of live ones need
    /// not each keep an error's room.
    var move: URLMove? {
        get { moveBox?.value }
        set { moveBox = newValue.map { Boxed($0) } }
    }
    private var moveBox: Boxed<URLMove>?
    /// The row lacks the validators and attempt of the answer accepted last: they are written
    /// before that answer's first byte reaches the partial file, or with the next row written for
    /// another reason (``answerAccepted(rowInMemory:segmented:bytesOnDisk:)``).
    private(set) var rowBehind = false

    /// - Parameters:
    ///   - failures: consecutive failed attempts without progress so far (from the journal).
    ///   - restarts: restarts from zero in those attempts.
    ///   - retryLimit: how many of them are retried.
    ///   - alternatives: how many other URLs (mirrors) the download may move to.
    ///   - refreshesURLs: whether a refresh hook gives fresh URLs for 401, 403 and 410.
    ///   - connectionRetryLimit: how many failed connections are retried before any answer (by
    ///     default as many as `retryLimit`).
    ///   - answered: whether a server answered the download before.
    init(
        url: String,
        failures: Int = 0,
        restarts: Int = 0,
        retryLimit: Int = 0,
        alternatives: Int = 0,
        refreshesURLs: Bool = false,
        connectionRetryLimit: Int? = nil,
        answered: Bool = false
    ) {
        self.url = url
        self.failures = failures
        self.restarts = restarts
        self.retryLimit = retryLimit
        self.connectionRetryLimit = connectionRetryLimit ?? retryLimit
        self.answered = answered
        self.alternatives = max(0, alternatives)
        self.refreshesURLs = refreshesURLs
    }

    // MARK: inputs from the scheduler

    /// A slot is free for this download; `needsHeaders`: the values of headers it must send are not
    /// known yet (it waits for them in its slot).
    mutating func admit(needsHeaders: Bool = false) -> Action {
        switch state {
        case .idle, .waitingToRetry: break
        default: preconditionFailure("admit() in state \(state)")
        }
        if needsHeaders {
            state = .awaitingHeaders
            return .askForHeaders
        }
        state = .connecting
        return .startRequest(truncatingPartial: false)
    }

    /// The header values arrived: the first request goes out. Ignored in any other state (a late
    /// answer for a download paused or cancelled meanwhile).
    mutating func headersArrived() -> Action {
        guard case .awaitingHeaders = state else { return .none }
        state = .connecting
        return .startRequest(truncatingPartial: false)
    }

    /// The refresh hook gave a fresh URL: requests go there (the owner sends the next one). Whether
    /// the machine was waiting for one.
    mutating func freshURLArrived() -> Bool {
        guard case .awaitingFreshURL = state else { return false }
        state = .connecting
        return true
    }

    /// The final response's head arrived (or the transfer ended before any body byte).
    mutating func responseReceived(_ decision: ResponseDecision) -> BodyAction {
        guard case .connecting = state else { preconditionFailure("responseReceived(\(decision)) in state \(state)") }
        answered = true
        switch decision {
        case .append(let total):
            state = .receiving
            return .accept(total: total, truncatingPartial: false, restart: nil)
        case .replace(let total, let reason):
            state = .receiving
            return .accept(total: total, truncatingPartial: true, restart: reason)
        case .alreadyComplete:
            state = .closing(.received)
            return .reject
        case .notModified:
            state = .closing(.unchanged)
            return .reject
        case .retryFromZero(let reason):
            if restarts >= Self.maximumRestarts {
                let error = DownloadError(code: .rangeNotHonored, url: url, detail: reason.description)
                state = .closing(.fail(error))
            } else {
                restarts += 1
                state = .closing(.restartFromZero)
            }
            return .reject
        case .fail(let status):
            state = .closing(.fail(DownloadError(code: .httpStatus, url: url, httpStatus: status)))
            return .reject
        case .rejectURL(let cause):
            state = .closing(.fail(cause))
            return .reject
        case .invalid(let detail):
            // curl's own code for an answer that is not valid HTTP (CURLE_WEIRD_SERVER_REPLY): not retried.
            state = .closing(.fail(DownloadError(code: .transport, url: url, curlCode: 8, detail: detail)))
            return .reject
        case .unproven(let detail):
            // Not the file (an error page sent as 200): a failed attempt, retried; nothing is replaced.
            state = .closing(.fail(DownloadError(code: .unexpectedAnswer, url: url, detail: detail)))
            return .reject
        case .askAgain:
            state = .closing(.askAgain)
            return .reject
        }
    }

    /// curl reported the transfer finished; its handle is removed by the owner.
    ///
    /// - Parameter progressed: whether this attempt took the partial file past the length it had when
    ///   the attempt started (which resets the counts of failed attempts and of restarts: a server that
    ///   drops every few hundred kilobytes still gets the file). Bytes that only replaced earlier ones
    ///   (a restart from zero, in the same response or a new request) are no progress: a server that
    ///   cuts every whole answer short, or answers every resume from the wrong byte, is not retried
    ///   forever.
    mutating func transferEnded(_ result: TransferResult, progressed: Bool = false) -> Action {
        if progressed {
            failures = 0
            restarts = 0
            alternativesTried = 0
            refreshed = false
        }
        switch (state, result) {
        case (.receiving, .received):
            state = .finishing
            return .received
        case (.receiving, .rangeEnded):
            // Not a failure and no delay: the next request asks for the bytes after this range.
            state = .connecting
            return .startRequest(truncatingPartial: false)
        case (.connecting, .failed(let error)), (.receiving, .failed(let error)):
            return failOrRetry(error)
        case (.closing(.received), _):
            state = .finishing
            return .received
        case (.closing(.unchanged), _):
            state = .finishing
            return .keepDestination
        case (.closing(.fail(let error)), _):
            return failOrRetry(error)
        case (.closing(.restartFromZero), _):
            state = .connecting
            return .startRequest(truncatingPartial: true)
        case (.closing(.askAgain), _):
            state = .connecting
            return .startRequest(truncatingPartial: false)
        default:
            preconditionFailure("transferEnded(\(result)) in state \(state)")
        }
    }

    private mutating func failOrRetry(_ error: DownloadError) -> Action {
        if refreshesURLs, !refreshed, error.code == .httpStatus, [401, 403, 410].contains(error.httpStatus ?? 0) {
            refreshed = true
            state = .awaitingFreshURL(error)
            return .refreshURL(error)
        }
        if error.movesToAnotherURL, alternativesTried < alternatives {
            alternativesTried += 1
            state = .connecting
            return .tryNextURL(error)
        }
        let limit = !answered && error.category == .connection ? min(retryLimit, connectionRetryLimit) : retryLimit
        guard error.isTransient, failures < limit else {
            state = .done(.failed(error))
            return .fail(error)
        }
        failures += 1
        state = .waitingToRetry
        return .retry(error)
    }

    /// The URL the machine moved to (``Action/tryNextURL(_:)``, ``Action/refreshURL(_:)``) gave no
    /// request: the refresh hook gave no URL, or every other URL was dropped. The download goes on
    /// as that failure says (another URL, a retry, or the end).
    mutating func urlRefused(_ error: DownloadError) -> Action {
        switch state {
        case .connecting, .awaitingFreshURL: return failOrRetry(error)
        default: return .none
        }
    }

    /// Requests go to `url` now (credentials removed): errors name it.
    mutating func requestsGo(to url: String) {
        self.url = url
    }

    /// One of the other URLs served another file than the partial's: it is not tried again (it does
    /// not count as one tried either).
    mutating func alternativeDropped() {
        alternatives = max(0, alternatives - 1)
        alternativesTried = max(0, alternativesTried - 1)
    }

    /// Writing the body failed here (the disk is full, the file grew past its maximum, the journal
    /// cannot be written): curl is made to end the transfer, which then fails or is retried with this
    /// error. Only a receiving download writes; in any other state (a second error of the same
    /// write) this changes nothing.
    mutating func bodyFailed(_ error: DownloadError) {
        guard case .receiving = state else { return }
        state = .closing(.fail(error))
    }

    /// The file is whole already, found before any request went out (placed by a process killed
    /// before its row said so; or every segment of it written): the download completes.
    mutating func foundComplete() -> Action {
        guard case .connecting = state else { preconditionFailure("foundComplete() in state \(state)") }
        state = .finishing
        return .received
    }

    /// One of the connections of a download fetched over several answered with another version of
    /// the file (or with the whole file, ignoring its range): the partial is emptied and the download
    /// starts again, as often as a changed answer to a resume may restart it (then it fails with
    /// `rangeNotHonored`). Only a receiving download has other connections.
    mutating func fileChanged(_ reason: RestartReason) -> Action {
        guard case .receiving = state else { return .none }
        guard restarts < Self.maximumRestarts else {
            return failOrRetry(DownloadError(code: .rangeNotHonored, url: url, detail: reason.description))
        }
        restarts += 1
        state = .connecting
        if reason == .rangeIgnored { overOneConnection = true }
        return .startRequest(truncatingPartial: true)
    }

    /// An answer was accepted: its validators are in the record, not yet in the journal's row. When
    /// the row must take them (``RowTiming``).
    mutating func answerAccepted(rowInMemory: Bool, segmented: Bool, bytesOnDisk: Int64) -> RowTiming {
        if rowInMemory {
            rowBehind = false
            return .whenSetAside
        }
        rowBehind = true
        return segmented || bytesOnDisk > 0 ? .now : .beforeFirstWrite
    }

    /// The row was written as the record stands: whether it had been behind.
    mutating func rowWritten() -> Bool {
        defer { rowBehind = false }
        return rowBehind
    }

    /// A server answered a segment's range with the whole file, which replaces the partial: the
    /// download goes on over one connection.
    mutating func rangeRefused() {
        overOneConnection = true
    }

    /// Connections of this download were answered with different versions of the file: at the
    /// second time, it goes on over one connection. Whether it does from now on (said once).
    mutating func versionsDiffered() -> Bool {
        versionConflicts += 1
        guard versionConflicts == 2, !overOneConnection else { return false }
        overOneConnection = true
        return true
    }

    /// A local failure outside the transfer (the partial file cannot be opened, the state directory
    /// cannot be created, curl refused the handle). Ignored once done.
    mutating func fail(_ error: DownloadError) -> Action {
        if hasEnded { return .none }
        state = .done(.failed(error))
        return .fail(error)
    }

    /// The finished file is in place (or a stream's reader took its last bytes): the download
    /// completed.
    mutating func placed() {
        guard case .finishing = state else { preconditionFailure("placed() in state \(state)") }
        state = .done(.completed)
    }

    /// Moving the finished file into place failed: the download failed, or, when the disk was full
    /// (its bytes are kept in the partial file), it is retried as any transient failure is.
    mutating func completionFailed(_ error: DownloadError) -> Action {
        guard case .finishing = state else { preconditionFailure("completionFailed() in state \(state)") }
        if error.isOutOfSpace { return failOrRetry(error) }
        state = .done(.failed(error))
        return .fail(error)
    }

    /// The user cancelled a download whose bytes were all received but not all handed on yet (a
    /// stream's last bytes wait for its reader, who went away): finishing becomes done(cancelled).
    /// A file being moved into place is not cancelled (``cancel()``).
    mutating func cancelHandOver() -> Action {
        guard case .finishing = state else { return cancel() }
        state = .done(.cancelled)
        return .cancel
    }

    // MARK: inputs from the user

    /// The user paused: keep the bytes, free the connection.
    mutating func pause() -> Action {
        switch state {
        case .idle, .waitingToRetry, .awaitingHeaders, .connecting, .awaitingFreshURL, .receiving, .closing:
            state = .paused
            return .pause
        case .paused, .finishing, .done:
            return .none
        }
    }

    /// The user cancelled: stop and delete the partial file.
    mutating func cancel() -> Action {
        switch state {
        case .idle, .waitingToRetry, .awaitingHeaders, .connecting, .awaitingFreshURL, .receiving, .closing,
            .paused:
            state = .done(.cancelled)
            return .cancel
        case .finishing, .done:
            return .none
        }
    }

    /// Whether no request goes out for it again: finishing or done.
    var hasEnded: Bool {
        switch state {
        case .finishing, .done: true
        default: false
        }
    }
}
