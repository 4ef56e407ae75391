import Dispatch

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

/// The instants behind a ``DownloadTimings`` (uptime nanoseconds; 0: not yet), written on the loop
/// thread and read anywhere under the download's lock.
package struct TimingLedger {
    let createdAt = DispatchTime.now().uptimeNanoseconds
    var firstRequestAt: UInt64 = 0
    var firstByteAt: UInt64 = 0
    var endedAt: UInt64 = 0
    var attempts = 0
    var connectionsOpened = 0
    var connectionsReused = 0
    /// The first answered request's phases in microseconds (0: none yet), and the last status.
    var phases: (nameLookup: UInt32, connect: UInt32, tls: UInt32, firstByte: UInt32) = (0, 0, 0, 0)
    var status: Int16 = 0
    /// The statuses before `status` (empty, and no allocation, for a download answered once).
    var earlierStatuses: [Int16] = []

    package init() {}

    /// A request (not a redirect's) goes out.
    package mutating func requestStarted() {
        attempts += 1
        if firstRequestAt == 0 { firstRequestAt = DispatchTime.now().uptimeNanoseconds }
    }

    /// A body was accepted: its first byte is here.
    package mutating func bodyStarted() {
        if firstByteAt == 0 { firstByteAt = DispatchTime.now().uptimeNanoseconds }
    }

    /// A request's handle leaves curl: `opened` connections curl made for it; none, for a request
    /// that was answered, means it went over one already open.
    /// `status`: its answer's (0 for none); `phases`: curl's times of it, in microseconds
    /// (``EasyHandle/phaseTimes``), kept for the first request answered.
    package mutating func requestStopped(
        opened: Int,
        status: Int,
        phases: (nameLookup: Int64, connect: Int64, tls: Int64, firstByte: Int64)
    ) {
        if opened > 0 {
            connectionsOpened += opened
        } else if status > 0 {
            connectionsReused += 1
        }
        guard status > 0 else { return }
        if self.status != 0 { earlierStatuses.append(self.status) }
        self.status = Int16(clamping: status)
        if self.phases.firstByte == 0, phases.firstByte > 0 {
            self.phases = (
                UInt32(clamping: phases.nameLookup), UInt32(clamping: phases.connect), UInt32(clamping: phases.tls),
                UInt32(clamping: phases.firstByte)
            )
        }
    }

    /// The download ended (its final event is being published).
    package mutating func ended() {
        if endedAt == 0 { endedAt = DispatchTime.now().uptimeNanoseconds }
    }

    package func timings(bytes: Int64) -> DownloadTimings {
        func span(_ from: UInt64, _ to: UInt64) -> Duration? {
            from == 0 || to == 0 ? nil : .nanoseconds(Int64(to >= from ? to - from : 0))
        }
        let phases = self.phases
        return DownloadTimings(
            queued: span(createdAt, firstRequestAt),
            timeToFirstByte: span(firstRequestAt, firstByteAt),
            total: span(firstRequestAt, endedAt),
            bytes: bytes,
            attempts: attempts,
            connectionsOpened: connectionsOpened,
            connectionsReused: connectionsReused,
            phases: phases.firstByte == 0
                ? nil
                : DownloadTimings.Phases(
                    nameLookup: .microseconds(Int64(phases.nameLookup)),
                    connect: .microseconds(Int64(phases.connect)),
                    tls: phases.tls == 0 ? nil : .microseconds(Int64(phases.tls)),
                    firstByte: .microseconds(Int64(phases.firstByte))
                ),
            status: status == 0 ? nil : Int(status),
            earlierStatuses: earlierStatuses.map(Int.init)
        )
    }
}
