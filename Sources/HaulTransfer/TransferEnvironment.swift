import CHaul
import HaulIO
import HaulValues
import Logging
import Tracing

/// What every transfer of one scheduler shares: the loop, the pools, the limits. Loop thread only.
package final class TransferEnvironment {
    package let reactor: Reactor
    package let easyHandles: EasyHandlePool
    /// Write buffers, reused across transfers.
    package let buffers: BufferPool
    /// Partial files held open between writes, against the descriptor budget's share for them.
    package let openPartialFiles: OpenPartialFiles
    /// Checkpoint syncs not reported yet (a truncation makes them stale).
    package var syncs = SyncLedger()
    /// File names chosen by running downloads into folders, not yet in their journal rows: another
    /// download into the same folder never chooses one of them.
    var claimedNames: Set<String> = []
    let census: Census
    let logger: Logger
    /// The shortest time between two `.progress` events of one download, in nanoseconds.
    let progressInterval: UInt64
    /// The largest file a download accepts.
    let maximumFileSize: Int64?
    /// How many transient failures in a row are retried.
    let retryLimit: Int
    /// How long a download waits before it retries (``Transfer/settle(_:interruptedByShutdown:)``).
    package let retryPolicy: RetryPolicy
    /// ``DownloadManager/Configuration/connectionRetryLimit``.
    let connectionRetryLimit: Int?
    /// Partials without a strong validator are continued after an overlap check (see
    /// ``DownloadManager/Configuration/resumesWithoutValidator``).
    let resumesWithoutValidator: Bool
    /// A finished file gets the server's Last-Modified as its modification time.
    let setsModificationTimeFromServer: Bool
    /// The headers of every request (``DownloadManager/Configuration/headers``).
    let defaultHeaders: [DownloadHeader]
    /// A refresh hook gives fresh URLs (``DownloadManager/Configuration/urlRefresher``).
    let refreshesURLs: Bool
    /// Partial files of a known length reserve their blocks at the start.
    let preallocatesFiles: Bool
    /// The bandwidth limits every transfer shares.
    package let rateLimiter: RateLimiter
    /// Connections per file by default, and the smallest segment (``DownloadManager/Configuration``).
    let connectionsPerFile: Int
    let minimumSegmentSize: Int64
    /// The manager's metrics.
    package let metrics: HaulMetrics
    /// Where each attempt's span goes.
    let tracer: any Tracer
    /// Segmented transfers with work for another connection, collected during a loop turn: the
    /// scheduler grants them connections at its end (``Admission``), outside curl's callbacks.
    ///
    /// This and ``refusedWhenUnpaused`` are the two ways up besides ``SlotAction``: both are filled
    /// inside curl's callbacks, which run inside `curl_multi_socket_action`, where a transfer has no
    /// caller to hand an action to; asking every transfer at each turn's end instead would cost a
    /// look at each of thousands of transfers per turn.
    package private(set) var wantingConnections: [DownloadID: Transfer] = [:]
    /// Requests whose write callback refused the chunk curl gave again when the rate limiter unpaused
    /// them (inside `curl_easy_pause`): curl returns the error there and never reports the request
    /// done, so the scheduler ends them at the end of the turn as if curl had (their handle and the
    /// code curl returned).
    package private(set) var refusedWhenUnpaused: [(handle: UnsafeMutableRawPointer, code: CURLcode)] = []

    /// `transfer` has work for another connection (this turn).
    func wantsConnection(_ transfer: Transfer) { wantingConnections[transfer.id] = transfer }

    /// curl refused the chunk of request `handle` with `code` while unpausing it (see
    /// ``refusedWhenUnpaused``).
    func refusedWhenUnpausing(_ handle: UnsafeMutableRawPointer, code: CURLcode) {
        refusedWhenUnpaused.append((handle, code))
    }

    /// The transfers that wanted a connection this turn, taken by the scheduler at its end.
    package func takeWantingConnections() -> [DownloadID: Transfer] {
        defer { wantingConnections = [:] }
        return wantingConnections
    }

    /// The requests refused while unpausing this turn, taken by the scheduler at its end.
    package func takeRefusedWhenUnpaused() -> [(handle: UnsafeMutableRawPointer, code: CURLcode)] {
        defer { refusedWhenUnpaused = [] }
        return refusedWhenUnpaused
    }
    /// The `If-Range` form each host showed it honours, for the hosts that ignored the default one
    /// (``IfRangeForm``): a CDN that answers an ETag `If-Range` by the whole file is asked with a date
    /// or a plain range from then on. Only misbehaving hosts have an entry.
    var ifRangeForms: [String: IfRangeForm] = [:]

    package init(
        reactor: Reactor,
        easyHandles: EasyHandlePool,
        buffers: BufferPool,
        openPartialFiles: OpenPartialFiles,
        census: Census,
        logger: Logger,
        progressInterval: Duration,
        maximumFileSize: Int64?,
        retryLimit: Int,
        retryPolicy: RetryPolicy,
        connectionRetryLimit: Int? = nil,
        resumesWithoutValidator: Bool,
        setsModificationTimeFromServer: Bool,
        defaultHeaders: [DownloadHeader] = [],
        refreshesURLs: Bool = false,
        preallocatesFiles: Bool = true,
        rateLimits: RateLimits = RateLimits(),
        connectionsPerFile: Int = 1,
        minimumSegmentSize: Int64 = 4 * 1024 * 1024,
        metrics: HaulMetrics = HaulMetrics(factory: nil),
        tracer: any Tracer = InstrumentationSystem.tracer
    ) {
        self.reactor = reactor
        self.easyHandles = easyHandles
        self.buffers = buffers
        self.openPartialFiles = openPartialFiles
        self.census = census
        self.logger = logger
        self.progressInterval = progressInterval.nanoseconds
        self.maximumFileSize = maximumFileSize
        self.retryLimit = max(0, retryLimit)
        self.retryPolicy = retryPolicy
        self.connectionRetryLimit = connectionRetryLimit.map { max(0, $0) }
        self.resumesWithoutValidator = resumesWithoutValidator
        self.setsModificationTimeFromServer = setsModificationTimeFromServer
        self.defaultHeaders = defaultHeaders
        self.refreshesURLs = refreshesURLs
        self.preallocatesFiles = preallocatesFiles
        self.rateLimiter = RateLimiter(reactor: reactor, limits: rateLimits)
        self.connectionsPerFile = connectionsPerFile
        self.minimumSegmentSize = minimumSegmentSize
        self.metrics = metrics
        self.tracer = tracer
    }
}
