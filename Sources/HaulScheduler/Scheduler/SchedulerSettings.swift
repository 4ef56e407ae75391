import FoundationEssentials
import HaulValues
import Logging

/// What a ``Scheduler`` is given by its manager: the settings it uses and the application's hooks,
/// as values. It never reads the manager's configuration (the facade, above it, makes this from it:
/// `DownloadManager+Scheduler.swift`).
package struct SchedulerSettings: Sendable {
    /// A URL and the headers to send with it, from the application's URL refresher.
    package typealias FreshURL = (url: URL, headers: [DownloadHeader]?)
    /// The application's header provider: the values of the headers a restored download names (its
    /// id, URL, destination and the names).
    package typealias HeaderValues = @Sendable (DownloadID, URL, URL, [String]) async throws -> [DownloadHeader]
    /// The application's URL refresher: a fresh URL for one that answered 401, 403 or 410 (the
    /// download's id, URL, destination and the status).
    package typealias URLRefresher = @Sendable (DownloadID, URL, URL, Int) async throws -> FreshURL?

    /// How many downloads may run at once (within the descriptor budget), and how many per host.
    package var slots: Int
    var perHostLimit: Int?
    /// How many connections may be open at once (the descriptor budget's share for transfers).
    var connectionLimit: Int
    /// How many downloads whose bytes are all received may wait on the disk lanes at once.
    var finishingLimit: Int
    /// Streams per HTTP/2 connection, when the manager offers HTTP/2 (``ConnectionGrants``); nil
    /// when every request is HTTP/1.1.
    var streamsPerConnection: Int?
    /// How often admitted downloads' rows are brought up to date (zero: never between events).
    var checkpointInterval: Duration
    /// How long a request may receive nothing before it is ended as stalled.
    var stallTimeout: Duration
    /// The configured state directory, whose journal is never closed as idle.
    var keptDirectory: String?
    var logger: Logger
    /// The application's header provider, or nil when it gave none.
    var headerValues: HeaderValues?
    /// The application's URL refresher, or nil when it gave none.
    var freshURL: URLRefresher?

    package init(
        slots: Int,
        perHostLimit: Int? = nil,
        connectionLimit: Int,
        finishingLimit: Int,
        streamsPerConnection: Int? = nil,
        checkpointInterval: Duration,
        stallTimeout: Duration,
        keptDirectory: String? = nil,
        logger: Logger,
        headerValues: HeaderValues? = nil,
        freshURL: URLRefresher? = nil
    ) {
        self.slots = slots
        self.perHostLimit = perHostLimit
        self.connectionLimit = connectionLimit
        self.finishingLimit = finishingLimit
        self.streamsPerConnection = streamsPerConnection
        self.checkpointInterval = checkpointInterval
        self.stallTimeout = stallTimeout
        self.keptDirectory = keptDirectory
        self.logger = logger
        self.headerValues = headerValues
        self.freshURL = freshURL
    }
}
