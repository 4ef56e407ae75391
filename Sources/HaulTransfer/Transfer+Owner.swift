import CHaul
import FoundationEssentials
import Glibc
import HaulIO
import HaulValues

/// What its owner, the ``Scheduler``, may ask of a transfer and tell it besides the machine's inputs
/// (`Transfer.swift`). Everything else of a transfer is its own: what is not `package` here (its
/// stored properties among it) is internal to the `HaulTransfer` target, and the compiler refuses it
/// to the scheduler.
extension Transfer {
    /// The handle callers hold.
    package var handle: LiveDownload { download }
    /// The state directory whose journal holds its row.
    package var directory: String { store.directory }
    /// Whether its machine reached its end or is finishing (the file being placed): no request
    /// goes out for it again, and a pause does not apply.
    package var hasEnded: Bool { machine.hasEnded }
    /// Restarts from zero since it last progressed: carried to its next attempt after a retry.
    package var restarts: Int { machine.restarts }

    // MARK: the hooks

    /// The names of the headers whose values it waits for (its row holds names only).
    var headerNames: [String] { record.headerNames }
    /// Waiting in its slot for the header provider's values.
    package var isAwaitingHeaders: Bool {
        if case .awaitingHeaders = machine.state { return true }
        return false
    }
    /// The failure for which it waits in its slot for a fresh URL from the refresher, if it does.
    package var awaitedFreshURL: DownloadError? {
        if case .awaitingFreshURL(let cause) = machine.state { return cause }
        return nil
    }
    /// Its URL as its row holds it (credentials removed): what the header provider is told.
    package var rowURL: URL { URL(string: record.url) ?? download.url }
    /// The URL in use, credentials removed: what the URL refresher is told.
    package var redactedURL: URL { URL(string: download.url.redactedString) ?? download.url }
    package var destination: URL { download.destination }

    /// The refresher gave no fresh URL for `cause`: it goes on as that failure says.
    package func urlRefused(_ cause: DownloadError) -> SlotAction {
        slotAction(for: perform(machine.urlRefused(cause)))
    }

    /// The refresher gave `url` (and `headers`, if any, which its requests send from now on and its
    /// row names) for `cause`: it moves there, if it still waits for one.
    package func freshURLArrived(_ url: URL, headers: [DownloadHeader]?, after cause: DownloadError) -> SlotAction {
        if let headers {
            send(headers: headers)
            record.headerNames = headers.map(\.name)
        }
        guard machine.freshURLArrived() else { return .none }
        return slotAction(for: move(to: url, after: cause, counted: false))
    }

    /// The transfer whose request handle `raw` carries (its own request's, or one of its other
    /// connections'), found from the handle's context; `nil` for a handle of none. The owner asks
    /// it, and routes nothing by handle itself.
    package static func owning(_ raw: UnsafeMutableRawPointer) -> Transfer? { Connection.of(raw)?.transfer }

    /// Its connection whose request handle is `raw` now, if any.
    private func connection(of raw: UnsafeMutableRawPointer) -> Connection? {
        guard let connection = Connection.of(raw), connection.transfer === self, connection.easy?.raw == raw else {
            return nil
        }
        return connection
    }

    /// The request of handle `raw` ended with `result`: curl reported it done, the owner's stall
    /// sweep ended it, or it refused a chunk while the rate limiter let it go. `nil` when `raw` is
    /// no request of this transfer now (its owner removes the handle).
    package func ended(request raw: UnsafeMutableRawPointer, result: CURLcode) -> SlotAction? {
        guard let connection = connection(of: raw) else { return nil }
        let result = connection.easy?.vetted(result) ?? result
        if connection === own { return slotAction(for: requestEnded(result)) }
        return slotAction(for: fetchEnded(connection, result: result))
    }

    // MARK: limits, stalls

    /// Its own rate limit, at once (and in its row from its next checkpoint, for later attempts).
    package func limitRate(to rate: Int64?) {
        environment.rateLimiter.setLimit(rate, for: self)
        record.maxBytesPerSecond = rate
    }

    /// Its request `raw` received nothing for `seconds`: its owner ends it as timed out.
    package func stalled(_ raw: UnsafeMutableRawPointer, seconds: Int64) {
        connection(of: raw)?.stalledFor = seconds
    }

    // MARK: durability

    /// The job that syncs its partial file's first `bytes` (and, over several connections, records
    /// what each segment holds), or nil when they are durable already.
    package func checkpoint(bytes: Int64) -> DiskJob? {
        guard bytes > record.bytesSynced, let partialPath else { return nil }
        return .checkpoint(
            id,
            directory: store.directory,
            path: partialPath,
            bytes: bytes,
            segments: committedMap?.encoded
        )
    }

    /// Its partial file's first `bytes` are durable.
    package func synced(bytes: Int64) { record.bytesSynced = max(record.bytesSynced, bytes) }

    /// Over several connections: the segments' bytes in `snapshot` are durable. False when it is
    /// fetched over one connection (its row is brought up to date instead).
    package func syncedSegments(_ snapshot: String) -> Bool {
        guard let segments else { return false }
        segments.markSynced(snapshot)
        record.bytesSynced = segments.map.bytesSynced
        segmentBytesWritten()
        return true
    }
}
