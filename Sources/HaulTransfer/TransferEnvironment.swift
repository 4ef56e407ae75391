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
    /// How many names a transfer holds for a file it will place (``claimedNames``).
    package var claimedNameCount: Int { claimedNames.count }
    let census: Census
    let logger: Logger
    /// The shortest time between two `.progress` events of one download, in nanoseconds.
    let progressInterval: UInt64
    /// The largest file a download accepts.
    let maximumFileSize: Int64?
    /// How many transient failures in a row are retried.
    let retryLimit: Int
    /// How long a download waits before it retries (``Transfer/slotAction(for:interruptedByShutdown:)``).
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
    /// What transfers handed up with no caller to return it to (``SlotAction``): taken inside curl's
    /// write callback (inside `curl_multi_socket_action`), the rate limiter's timer or a stream's
    /// watch. The owner performs them at the end of the loop turn, in order.
    package private(set) var deferred: [(transfer: Transfer, action: SlotAction)] = []

    /// `transfer` hands `action` up with no caller: its owner performs it at the end of the turn.
    func hand(_ action: SlotAction, from transfer: Transfer) {
        if case .none = action { return }
        deferred.append((transfer, action))
    }

    /// The actions handed up since the owner last took them.
    package func takeDeferred() -> [(transfer: Transfer, action: SlotAction)] {
        defer { deferred = [] }
        return deferred
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
