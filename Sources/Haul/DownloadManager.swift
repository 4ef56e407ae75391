import FoundationEssentials
import Glibc
import HaulIO
import HaulScheduler
import HaulTransfer
import HaulValues
import Logging
import Synchronization

/// Runs downloads: one loop thread drives every transfer through libcurl's multi socket API on a
/// libevent loop, with no thread per download.
///
/// ```swift
/// try await withDownloadManager { manager in
///     let download = try manager.download(from: URL(string: "https://example.com/big.iso")!,
///                                         to: URL(fileURLWithPath: "/tmp/big.iso"))
///     let file = try await download.finished()
/// }
/// ```
///
/// Partial files are written under the configuration's ``Configuration/stateDirectory`` (by default a
/// `.haul` folder beside each destination) and renamed into place when whole. A download is its
/// destination (``DownloadID``): asking for the same destination again, in this process or a later
/// one, continues from the bytes already there, from the same URL or a new one (a refreshed signed
/// link, a mirror) whose answer proves it is the same file. Call ``shutdown()`` when done, or use ``withDownloadManager(configuration:_:)``.
public final class DownloadManager: Sendable {
    /// This Haul's version (`haul --version`).
    public static let version = "0.9.0"

    /// The configuration the manager was created with.
    public let configuration: Configuration
    let reactor: Reactor
    private let inbox: CommandInbox<SchedulerCommand>
    let scheduler: Scheduler
    let catalog: Catalog
    let queue: DownloadQueue
    private let currentRateLimits: Mutex<RateLimits>

    /// Starts a manager and its loop thread.
    ///
    /// With a configured ``Configuration/stateDirectory``, its journal is opened now: downloads that
    /// were queued or running when the last process stopped continue (see
    /// ``Configuration/resumesUnfinishedDownloads``), paused ones stay paused.
    ///
    /// - Throws: ``DownloadError`` with code `.invalidHeader` when one of the configuration's
    ///   ``Configuration/headers`` cannot be sent, `.invalidURL` or `.unsupportedScheme` for a
    ///   ``Configuration/proxy`` that is not a proxy URL, `.journalLocked` when another process holds the state
    ///   directory alone (taking it over), `.journal` when its journal is damaged, `.internalError` when the loop cannot be
    ///   created.
    public convenience init(configuration: Configuration = Configuration()) throws {
        try self.init(configuration: configuration, drivenBy: nil)
    }

    /// A manager whose loop runs on a thread of its own (`driven` nil), or is driven by a test
    /// (``Reactor/run(limit:)``) with `driven`'s clock, every connection going to its Unix socket.
    package init(configuration: Configuration, drivenBy driven: DrivenLoop?) throws {
        let configuration = configuration.normalized
        try withPublicErrors { try HaulValues.DownloadHeader.check(configuration.headers.engine, url: nil) }
        if let proxy = configuration.proxy { try Self.checkProxy(proxy) }
        self.configuration = configuration
        let catalog = Catalog(bootID: configuration.bootID)
        self.catalog = catalog
        // Raises the open-files limit (if allowed), which the budget is taken from.
        Reactor.prepareProcess(
            ignoringSIGPIPE: configuration.ignoresSIGPIPE,
            raisingOpenFilesLimit: configuration.raisesOpenFilesLimit
        )
        let budget = DescriptorBudget(
            openFilesLimit: configuration.openFilesLimitOverride ?? DescriptorBudget.currentLimit()
        )
        let reactor = try withPublicErrors {
            try Reactor(
                logger: configuration.logger,
                idleConnections: min(max(16, configuration.maxConcurrentDownloads), budget.transfers),
                streamsPerConnection: configuration.maxStreamsPerConnection,
                // Every easy handle then tells it of the sockets curl closes (TransferEnvironment's
                // options follow this setting).
                parksSockets: true,
                clock: driven?.clock ?? .system,
                embedded: driven != nil
            )
        }
        self.reactor = reactor
        let inbox = CommandInbox<SchedulerCommand>(reactor: reactor)
        self.inbox = inbox
        let settings = SchedulerSettings(configuration, budget: budget)
        self.scheduler = Scheduler(
            settings: settings,
            environment: TransferEnvironment(
                configuration,
                slots: settings.slots,
                budget: budget,
                reactor: reactor,
                census: catalog.census,
                unixSocketPath: driven?.unixSocketPath
            ),
            inbox: inbox,
            catalog: catalog
        )
        self.queue = DownloadQueue(
            stateDirectory: Self.configuredStateDirectory(configuration),
            revalidatesCompletedFiles: configuration.revalidatesCompletedFiles,
            recognizesPlacedFiles: configuration.recognizesPlacedFiles,
            catalog: catalog,
            inbox: inbox,
            writeNow: { [scheduler] in scheduler.writeRows([$0]) }
        )
        self.currentRateLimits = Mutex(configuration.rateLimits.normalized)
        var restored: String?
        if let directory = queue.configuredStateDirectory {
            try withPublicErrors {
                let journal = try catalog.journal(for: directory)
                if configuration.resumesUnfinishedDownloads { try journal.requeueInterrupted() }
            }
            restored = directory
        }
        // Set only now: the reactor holds its delegate strongly until its loop ends.
        reactor.delegate = scheduler
        if driven == nil { try withPublicErrors { try reactor.start() } }
        if let restored { inbox.submit(.queueChanged(restored)) }
    }

    /// Checks that `proxy` is a proxy URL curl can use.
    private static func checkProxy(_ proxy: URL) throws(DownloadError) {
        let schemes = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]
        guard let scheme = proxy.scheme?.lowercased(), schemes.contains(scheme) else {
            throw DownloadError(
                code: .unsupportedScheme,
                url: proxy.redactedString,
                detail: "the proxy scheme '\(proxy.scheme ?? "")' (a proxy is http://, https:// or socks5h://…)"
            )
        }
        guard let host = proxy.host, !host.isEmpty else {
            throw DownloadError(code: .invalidURL, url: proxy.redactedString, detail: "the proxy URL has no host")
        }
    }

    deinit {
        // A manager dropped without `shutdown()`: the loop pauses every download and ends; its thread
        // (which keeps the reactor and scheduler alive until then) is detached rather than joined.
        inbox.submitShutdown()
        reactor.detach()
    }

    /// Starts (or joins) the download of `url` to `destination`.
    ///
    /// If a download to `destination` is already queued or running, its handle is returned; a paused,
    /// interrupted or failed one is queued again (asking for a download again means wanting it). If
    /// `url` is not the one the download used, its next request goes to `url`: the bytes on disk
    /// continue only if the answer repeats the 64 KiB before their end and matches the recorded
    /// validator, else the download starts over. If `destination` already holds the complete file
    /// from `url`, nothing is transferred and the download completes at once; the complete file of
    /// another URL is replaced.
    ///
    /// The call returns once the download's row is in the journal: it waits for a turn of the
    /// manager's loop, which also serves every running transfer, and for that turn's commit. To ask
    /// for many downloads at once (thousands, while thousands run), ``enqueue(_:)`` writes them 2,048
    /// to a transaction and ``download(id:)`` then finds the handle of each.
    ///
    /// - Parameters:
    ///   - url: an absolute `http` or `https` URL.
    ///   - destination: a file URL; the file appears there only when whole.
    ///   - priority: downloads with a higher priority are admitted first; first in, first out within
    ///     one priority. The latest request's priority wins. Default 0.
    /// - Throws: ``DownloadError`` with code `.invalidURL`, `.unsupportedScheme`, `.fileSystem` (the
    ///   destination is a directory), or `.shutdown`. A journal that cannot be used fails the returned
    ///   download instead (code `.journal` or `.journalLocked`).
    public func download(from url: URL, to destination: URL, priority: Int = 0) throws -> Download {
        try download(DownloadRequest(url: url, destination: destination, priority: priority))
    }

    /// Starts (or joins) the download a request describes, with its priority, expected checksum and
    /// size; see ``download(from:to:priority:)-(URL,_,_)``.
    public func download(_ request: DownloadRequest) throws -> Download {
        try withPublicErrors { try queue.download(request) }
    }

    /// Starts the download of the URL written in `string`; see ``download(from:to:priority:)-(URL,_,_)``.
    ///
    /// - Throws: ``DownloadError`` with code `.invalidURL` when `string` is not a URL.
    public func download(from string: String, to destination: URL, priority: Int = 0) throws -> Download {
        try download(from: DownloadRequest.url(parsing: string), to: destination, priority: priority)
    }

    /// Queues many downloads at once, writing only journal rows: a queued download holds no memory in
    /// the manager, no connection and no file until it is admitted. Use ``download(id:)`` to follow
    /// one (ids come from ``DownloadID/init(url:destination:)``).
    ///
    /// Each request is treated as ``download(from:to:priority:)-(URL,_,_)`` treats it, without
    /// creating a handle. Rows are written in transactions of up to 2,048, so the sequence may be
    /// long (a million URLs) and lazily generated.
    ///
    /// - Returns: how many requests were queued, were already waiting or running, were already
    ///   complete, and which were rejected (with their position in `requests` and why).
    /// - Throws: ``DownloadError`` with code `.shutdown`, or a journal's error (`.journal`,
    ///   `.journalLocked`, `.fileSystem`); requests before the failing one stay queued.
    @discardableResult
    public func enqueue(_ requests: some Sequence<DownloadRequest>) throws -> EnqueueSummary {
        try withPublicErrors { try queue.enqueue(requests) }
    }

    /// The downloads that have not reached a final state: queued, running, paused or interrupted, in
    /// every journal this manager has open. Each is a handle made on demand: for a very large queue,
    /// prefer ``journalEntries(stateDirectory:)`` or ``download(id:)``.
    public var downloads: [Download] { queue.unfinishedDownloads }

    /// Every download's events, for the whole manager: state changes, progress and outcomes,
    /// downloads queued with ``enqueue(_:)`` included, without a handle for each. Each iteration
    /// sees the events from its start and ends when the manager shuts down; see
    /// ``DownloadManagerEvents``.
    public var events: DownloadManagerEvents { DownloadManagerEvents(feed: catalog.feed) }

    /// How each download ends (`.completed`, `.failed`, `.cancelled`), for the whole manager: the
    /// ``events`` without state changes and progress, which are not even made for the manager's
    /// feed while no iteration of ``events`` runs. For a caller that only counts outcomes (a load
    /// test, a list run quietly): less work per download on the loop and for the reader.
    public var outcomes: DownloadManagerEvents { DownloadManagerEvents(feed: catalog.feed, outcomesOnly: true) }

    /// The unfinished download with this id, in a journal this manager has open (its configured state
    /// directory, or one a download of this manager used): to follow a download restored from the
    /// journal or queued with ``enqueue(_:)``. `nil` when there is none, or it completed, failed or was
    /// cancelled.
    public func download(id: DownloadID) -> Download? { queue.download(id: id.engine) }

    /// The bandwidth limits in force (``Configuration/rateLimits``, or the last
    /// ``setRateLimits(_:)``).
    public var rateLimits: RateLimits { currentRateLimits.withLock { $0 } }

    /// Changes the manager's bandwidth limits while it runs: running transfers follow at once.
    public func setRateLimits(_ limits: RateLimits) {
        currentRateLimits.withLock { $0 = limits.normalized }
        inbox.submit(.setRateLimits(limits.engine))
    }

    /// Waits until no download of this manager is queued or running: each one completed, failed,
    /// was cancelled or is paused. Returns at once when the manager is shut down, and when it shuts
    /// down while waiting.
    public func waitUntilIdle() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            catalog.addIdleWaiter(waiter)
            if !inbox.submit(.checkIdle) { catalog.resumeIdleWaiters() }
        }
    }

    /// Opens `/dev/null` on standard descriptors that are closed (as a manager does when it starts),
    /// for a program that opens files before it makes one: a process started with `2>&-` would
    /// otherwise give descriptor 2 to the next file it opens, and what anyone writes to standard
    /// error would land in that file. Returns the descriptors that were closed.
    @discardableResult
    public static func openClosedStandardDescriptors() -> [Int32] { Reactor.openClosedStandardDescriptors() }

    /// Whether the file at `path` (through links, as a destination is) is one Haul placed whole
    /// from `url` and that has not changed since, by what Haul records on the files it places
    /// (extended attributes, as `curl --xattr` does: the URL in `user.xdg.origin.url`, its hash, the
    /// validators, the length and the modification time in `user.haul.version`). A manager uses
    /// this when a journal has lost a download's row; a program that names files itself uses it to
    /// tell its own earlier file from someone else's. `false` on a file system without user
    /// attributes.
    ///
    /// - Parameters:
    ///   - path: the file's path.
    ///   - url: the URL as text, as ``DownloadRequest/redacted(_:)`` gives it (the record never
    ///     holds a user name or a password).
    public static func isPlacedFile(at path: String, from url: String) -> Bool {
        guard let found = PlacedFile.at(path), let origin = FileOrigin.read(at: path) else { return false }
        return origin.describes(url: url, file: found)
    }

    /// Pauses every unfinished download (writing what is buffered and keeping the partial files),
    /// ends their event sequences, and stops the loop thread. Queued downloads stay in the journal.
    /// Idempotent.
    public func shutdown() async {
        if catalog.markShutDown() { inbox.submitShutdown() }
        if reactor.isEmbedded { reactor.run() }
        await reactor.waitUntilStopped()
        reactor.join()
    }
}

/// Runs `body` with a new ``DownloadManager`` and shuts the manager down when `body` returns or throws.
///
/// - Parameters:
///   - configuration: the manager's configuration.
///   - body: the work; downloads still unfinished when it returns are paused, their partial files kept.
@discardableResult
public func withDownloadManager<Result>(
    configuration: DownloadManager.Configuration = .init(),
    _ body: (DownloadManager) async throws -> Result
) async throws -> Result {
    let manager = try DownloadManager(configuration: configuration)
    do {
        let result = try await body(manager)
        await manager.shutdown()
        return result
    } catch {
        await manager.shutdown()
        throw error
    }
}
