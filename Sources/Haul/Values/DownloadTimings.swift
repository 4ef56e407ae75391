import Dispatch
import HaulValues

/// What one download cost in this process, for load tests and for a service's own accounting
/// (``Download/timings``): when its bytes came, how many requests and connections it took.
///
/// Times are measured with the monotonic clock. A download that was complete at its destination
/// already has no request: its times are `nil` and its counts 0.
public struct DownloadTimings: Sendable, Hashable {
    /// From the handle's creation (``DownloadManager/download(_:)``; for a download asked for with
    /// ``DownloadManager/enqueue(_:)``, its admission) to its first request: the wait for a slot, a
    /// per-host limit, a retry's backoff. `nil` before its first request.
    public var queued: Duration?
    /// From its first request to the first byte of a body it accepted (redirects, a refused answer
    /// and retries before it included). `nil` before one.
    public var timeToFirstByte: Duration?
    /// From its first request to its end (completed, failed or cancelled). `nil` until it ended.
    public var total: Duration?
    /// Body bytes received from the network in this process (``Download/bytesReceivedInThisProcess``).
    public var bytes: Int64
    /// Requests made for it, resumes and retries included, redirects followed not counted (a
    /// download over several connections counts its first request).
    public var attempts: Int
    /// Connections opened for its requests (TCP, and TLS when https).
    public var connectionsOpened: Int
    /// Requests that went over a connection already open (kept alive from an earlier request).
    public var connectionsReused: Int
    /// Where the first answered request's time went until its first byte, as libcurl measured it;
    /// `nil` before an answer.
    public var phases: Phases?
    /// The status of the last answer (`nil` before one): 200, 206, 404…
    public var status: Int?
    /// The statuses of the answers before the last, in order: a `503` that was retried, each
    /// segment's `206` but the last one's. Empty for a download answered once. With ``status``, every
    /// answer the server sent for it (a redirect libcurl followed within one request counts as the
    /// answer it led to).
    public var earlierStatuses: [Int]

    /// Where a request's time went until the first byte of its answer, each phase from the request's
    /// start (libcurl's `CURLINFO_*_TIME_T`, to the microsecond).
    public struct Phases: Sendable, Hashable {
        /// Resolving the host name (near 0 over a connection already open).
        public var nameLookup: Duration
        /// Connected (TCP): the name lookup included.
        public var connect: Duration
        /// The TLS handshake done (`nil` over http).
        public var tls: Duration?
        /// The first byte of the answer arrived (the status line): every phase before included.
        public var firstByte: Duration

        /// Creates a value (a download's come from ``DownloadTimings/phases``).
        public init(nameLookup: Duration, connect: Duration, tls: Duration?, firstByte: Duration) {
            (self.nameLookup, self.connect, self.tls, self.firstByte) = (nameLookup, connect, tls, firstByte)
        }
    }

    /// Creates a value (a download's come from ``Download/timings``).
    public init(
        queued: Duration? = nil,
        timeToFirstByte: Duration? = nil,
        total: Duration? = nil,
        bytes: Int64 = 0,
        attempts: Int = 0,
        connectionsOpened: Int = 0,
        connectionsReused: Int = 0,
        phases: Phases? = nil,
        status: Int? = nil,
        earlierStatuses: [Int] = []
    ) {
        self.queued = queued
        self.timeToFirstByte = timeToFirstByte
        self.total = total
        self.bytes = bytes
        self.attempts = attempts
        self.connectionsOpened = connectionsOpened
        self.connectionsReused = connectionsReused
        self.phases = phases
        self.status = status
        self.earlierStatuses = earlierStatuses
    }
}

extension DownloadTimings {
    /// The timings `ledger` holds, with the bytes received in this process.
    init(_ ledger: TimingLedger, bytes: Int64) {
        func span(_ from: UInt64, _ to: UInt64) -> Duration? {
            from == 0 || to == 0 ? nil : .nanoseconds(Int64(to >= from ? to - from : 0))
        }
        let phases = ledger.phases
        self.init(
            queued: span(ledger.createdAt, ledger.firstRequestAt),
            timeToFirstByte: span(ledger.firstRequestAt, ledger.firstByteAt),
            total: span(ledger.firstRequestAt, ledger.endedAt),
            bytes: bytes,
            attempts: ledger.attempts,
            connectionsOpened: ledger.connectionsOpened,
            connectionsReused: ledger.connectionsReused,
            phases: phases.firstByte == 0
                ? nil
                : DownloadTimings.Phases(
                    nameLookup: .microseconds(Int64(phases.nameLookup)),
                    connect: .microseconds(Int64(phases.connect)),
                    tls: phases.tls == 0 ? nil : .microseconds(Int64(phases.tls)),
                    firstByte: .microseconds(Int64(phases.firstByte))
                ),
            status: ledger.status == 0 ? nil : Int(ledger.status),
            earlierStatuses: ledger.earlierStatuses.map(Int.init)
        )
    }
}

extension DownloadTimings: CustomStringConvertible {
    /// "queued 2 ms, first byte after 14 ms, total 1.25 s; 32.0 MiB in 2 requests, 1 connection
    /// opened, 1 reused" (the times not known yet are left out).
    public var description: String {
        var times: [String] = []
        if let queued { times.append("queued \(HumanUnits.duration(queued))") }
        if let timeToFirstByte { times.append("first byte after \(HumanUnits.duration(timeToFirstByte))") }
        if let total { times.append("total \(HumanUnits.duration(total))") }
        let requests = attempts == 1 ? "1 request" : "\(attempts) requests"
        let opened = connectionsOpened == 1 ? "1 connection opened" : "\(connectionsOpened) connections opened"
        let counts = "\(HumanUnits.bytes(bytes)) in \(requests), \(opened), \(connectionsReused) reused"
        return times.isEmpty ? counts : times.joined(separator: ", ") + "; " + counts
    }
}
