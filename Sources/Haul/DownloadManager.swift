import FoundationEssentials
import Glibc
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
/// `.haul` folder beside each destination) and renamed into place when whole. A download of the same
/// URL to the same destination, in this process or a later one, continues from the bytes already
/// there. Call ``shutdown()`` when done, or use ``withDownloadManager(configuration:_:)``.
public final class DownloadManager: Sendable {
    /// How a manager runs its downloads.
    public struct Configuration: Sendable {
        /// How many downloads transfer at once (a finishing one counts until its file is in place);
        /// the others wait as rows of the journal, holding no object, connection, file descriptor or
        /// buffer. Default 16.
        ///
        /// At most half of the process's open-files limit (`RLIMIT_NOFILE`, raised to its hard limit
        /// when the first manager starts) runs at once, whatever is set here: each transfer holds a
        /// socket. With the common hard limit of 1,048,576 that is never reached; where the limit is
        /// lower, the manager logs the number it runs at.
        public var maxConcurrentDownloads: Int = 16
        /// How many downloads from one host (host and port) transfer at once, across all downloads;
        /// the queue skips to other hosts' downloads meanwhile. `nil` (the default): no limit but
        /// ``maxConcurrentDownloads``.
        public var maxConcurrentDownloadsPerHost: Int?
        /// How many bytes are collected before a write to the partial file (YYDownload's
        /// `kBufferSize`). Progress counts written bytes only. Default 128 KiB. Buffers take at most
        /// 2 MiB at once (at least 4 buffers): more fast transfers than that write each chunk
        /// straight to their file, and slow ones always do.
        public var bufferSize: Int = 128 * 1024
        /// The shortest time between two `.progress` events of one download. Default 200 ms.
        public var progressInterval: Duration = .milliseconds(200)
        /// Where partial files and the journal live. `nil` (the default) puts them in a `.haul` folder
        /// beside each destination, on the same file system so the final rename is atomic.
        ///
        /// When set, the manager opens this directory's journal at start (failing with
        /// `.journalLocked` if another process holds it) and restores every unfinished download in it:
        /// see ``resumesUnfinishedDownloads``.
        public var stateDirectory: URL?
        /// For a manager with a ``stateDirectory``: whether downloads that were running or queued when
        /// the last process stopped (shut down, crashed or killed) continue at once. Downloads the user
        /// paused stay paused either way. Default `true`.
        public var resumesUnfinishedDownloads = true
        /// How often a receiving download's partial file is synced to stable storage (off the loop
        /// thread) and the synced length recorded: after a reboot, a partial is cut back to it. Pauses
        /// and shutdowns sync too. Default 5 s.
        public var checkpointInterval: Duration = .seconds(5)
        /// Whether a download whose destination already holds the complete file asks the server if it
        /// changed (If-None-Match / If-Modified-Since) instead of transferring nothing. A 304 keeps the
        /// file; a 200 fetches the new version and replaces it atomically. Default `false`.
        public var revalidatesCompletedFiles = false
        /// Tests inject another boot's id to simulate a reboot.
        var bootIDOverride: String?
        /// Tests inject a smaller open-files limit than the process's (see ``DescriptorBudget``).
        var openFilesLimitOverride: Int?
        /// The boot id journals are stamped with: this boot's, unless a test injects another.
        var bootID: String { bootIDOverride ?? Journal.currentBootID() }
        /// The longest wait for a connection. Default 30 s.
        public var connectTimeout: Duration = .seconds(30)
        /// How many consecutive attempts that fail transiently (connection refused or reset,
        /// timeout, a body cut short, HTTP 408, 429 or 5xx) without writing a byte are retried
        /// before the download fails; an attempt that wrote bytes resets the count. Every retry
        /// resumes from the bytes on disk. 0 turns retries off. Default 5.
        public var retryLimit = 5
        /// The delay before the first retry; each next one doubles it, up to ``maximumRetryDelay``,
        /// with a random part (between half and all of it). A server's `Retry-After` is honoured
        /// instead (up to an hour). Default 1 s.
        public var retryDelay: Duration = .seconds(1)
        /// The longest backoff between two attempts. Default 60 s.
        public var maximumRetryDelay: Duration = .seconds(60)
        /// A transfer that receives nothing for this long (whole seconds, at least 1) is aborted and
        /// retried. Time spent queued never counts. Default 30 s.
        public var stallTimeout: Duration = .seconds(30)
        /// The largest file a download accepts, in bytes: a larger announced length, or a body that
        /// grows past it, fails the download with `.fileTooLarge`. `nil` (the default): no limit.
        public var maximumFileSize: Int64?
        /// A PEM file of certificate authorities to verify HTTPS servers with, instead of the
        /// system's. Verification itself is never turned off.
        public var certificateAuthorityFile: URL?
        /// How many redirects a download follows. Default 10.
        public var maximumRedirects: Int = 10
        /// How many downloads share one HTTP/2 connection; more downloads from the host open another
        /// connection. Default 8: libcurl 7.88's multi-socket API runs every transfer of a connection
        /// on each of its socket events, so the CPU spent per event grows with the streams on it
        /// (10,000 files of 64 KiB at 100 in flight over HTTPS: 5.2-5.5 s on one connection,
        /// 3.0-3.4 s on connections of 8 streams).
        public var maxStreamsPerConnection: Int = 8
        /// The User-Agent header.
        public var userAgent: String = "Haul/0.1"
        /// Where the manager logs; by default nowhere.
        public var logger: Logger = Logger(label: "haul", factory: { _ in SwiftLogNoOpLogHandler() })

        /// The defaults.
        public init() {}
    }

    /// The configuration the manager was created with.
    public let configuration: Configuration
    private let reactor: Reactor
    let scheduler: Scheduler
    let catalog: Catalog
    /// The configured state directory's standardized path.
    private let configuredStateDirectory: String?

    /// Starts a manager and its loop thread.
    ///
    /// With a configured ``Configuration/stateDirectory``, its journal is opened now: downloads that
    /// were queued or running when the last process stopped continue (see
    /// ``Configuration/resumesUnfinishedDownloads``), paused ones stay paused.
    ///
    /// - Throws: ``DownloadError`` with code `.journalLocked` when another process uses the state
    ///   directory, `.journal` when its journal is damaged, `.internalError` when the loop cannot be
    ///   created.
    public init(configuration: Configuration = Configuration()) throws {
        var configuration = configuration
        configuration.maxConcurrentDownloads = max(1, configuration.maxConcurrentDownloads)
        configuration.maxConcurrentDownloadsPerHost = configuration.maxConcurrentDownloadsPerHost.map { max(1, $0) }
        configuration.bufferSize = max(4096, configuration.bufferSize)
        configuration.maxStreamsPerConnection = max(1, configuration.maxStreamsPerConnection)
        self.configuration = configuration
        self.configuredStateDirectory = configuration.stateDirectory?.standardizedFileURL.path
        let catalog = Catalog(configuration: configuration)
        self.catalog = catalog
        Reactor.prepareProcess()  // raises the open-files limit, which the budget is taken from
        let budget = DescriptorBudget(
            openFilesLimit: configuration.openFilesLimitOverride ?? DescriptorBudget.currentLimit()
        )
        let reactor = try Reactor(
            logger: configuration.logger,
            idleConnections: min(max(16, configuration.maxConcurrentDownloads), budget.transfers),
            streamsPerConnection: configuration.maxStreamsPerConnection
        )
        self.reactor = reactor
        self.scheduler = Scheduler(configuration: configuration, budget: budget, reactor: reactor, catalog: catalog)
        var restored: String?
        if let directory = configuredStateDirectory {
            let journal = try catalog.journal(for: directory)
            if configuration.resumesUnfinishedDownloads { try journal.requeueInterrupted() }
            restored = directory
        }
        // Set only now: the reactor holds its delegate strongly until its loop ends.
        reactor.delegate = scheduler
        try reactor.start()
        if let restored { reactor.submit(.queueChanged(restored)) }
    }

    deinit {
        // A manager dropped without `shutdown()`: the loop pauses every download and ends; its thread
        // (which keeps the reactor and scheduler alive until then) is detached rather than joined.
        reactor.submit(.shutdown)
        reactor.detach()
    }

    /// Starts (or joins) the download of `url` to `destination`.
    ///
    /// If the same URL is already queued or downloading to the same destination, that download's
    /// handle is returned; a paused, interrupted or failed one is queued again (asking for a download
    /// again means wanting it). If `destination` already holds the complete file from an earlier
    /// download, nothing is transferred and the download completes at once.
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
        let request = try prepare(request)
        guard !catalog.isShutDown else { throw DownloadError(code: .shutdown, url: request.url.redactedString) }
        let journal: Journal
        do {
            journal = try catalog.journal(for: request.stateDirectory)
        } catch {
            var error = error
            error.url = request.url.redactedString
            let download = makeHandle(for: request, progress: DownloadProgress(bytesReceived: 0, totalBytes: nil))
            download.hub.publish(.failed(error))
            return download
        }
        let (download, outcome) = try journal.locked { () throws(DownloadError) -> (Download, QueueOutcome) in
            let outcome = try enqueue(request, in: journal)
            let download = publish(outcome, for: request, in: journal, creatingHandle: true)!
            return (download, outcome)
        }
        if case .queued = outcome { reactor.submit(.queueChanged(request.stateDirectory)) }
        return download
    }

    /// Starts the download of the URL written in `string`; see ``download(from:to:priority:)-(URL,_,_)``.
    ///
    /// - Throws: ``DownloadError`` with code `.invalidURL` when `string` is not a URL.
    public func download(from string: String, to destination: URL, priority: Int = 0) throws -> Download {
        let trimmed = string.trimmingWhitespace
        // Foundation would percent-encode spaces and control characters; a URL has none.
        guard
            !trimmed.unicodeScalars.contains(where: {
                $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7f
            }),
            let url = URL(string: trimmed)
        else {
            throw DownloadError(code: .invalidURL, url: string, detail: "it could not be parsed")
        }
        return try download(from: url, to: destination, priority: priority)
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
        var summary = EnqueueSummary()
        var iterator = requests.makeIterator()
        var position = 0
        /// The next request that passes the checks; the others are recorded as rejected.
        func nextValid() -> PreparedRequest? {
            while let candidate = iterator.next() {
                defer { position += 1 }
                do throws(DownloadError) {
                    return try prepare(candidate)
                } catch {
                    summary.rejected.append(.init(index: position, error: error))
                }
            }
            return nil
        }
        var carried = nextValid()
        // After 8 full runs into one journal (16,384 rows) this call is a bulk enqueue: that journal
        // gets a larger page cache until the call returns.
        var fullRuns: [ObjectIdentifier: Int] = [:]
        var bulkJournals: [Journal] = []
        defer { for journal in bulkJournals { journal.endBulkWrite() } }
        while let first = carried {
            guard !catalog.isShutDown else { throw DownloadError(code: .shutdown, url: first.url.redactedString) }
            // A run of up to 2,048 requests into one journal, checked before the journal is locked:
            // the lock is held only to write them (the loop thread, which also needs it to admit
            // downloads, gets it between runs).
            var batch = [first]
            carried = nil
            while batch.count < 2048, let next = nextValid() {
                guard next.stateDirectory == first.stateDirectory else {
                    carried = next
                    break
                }
                batch.append(next)
            }
            if batch.count == 2048, carried == nil { carried = nextValid() }
            let journal = try catalog.journal(for: first.stateDirectory)
            if batch.count == 2048 {
                fullRuns[ObjectIdentifier(journal), default: 0] += 1
                if fullRuns[ObjectIdentifier(journal)] == 8 {
                    journal.beginBulkWrite()
                    bulkJournals.append(journal)
                }
            }
            let queuedAny = try journal.transaction { () throws(DownloadError) -> Bool in
                var queuedAny = false
                for request in batch {
                    let outcome = try enqueue(request, in: journal)
                    _ = publish(outcome, for: request, in: journal, creatingHandle: false)
                    switch outcome {
                    case .queued: summary.queued += 1; queuedAny = true
                    case .waiting: summary.alreadyQueued += 1
                    case .complete: summary.alreadyComplete += 1
                    }
                }
                return queuedAny
            }
            if queuedAny { reactor.submit(.queueChanged(first.stateDirectory)) }
        }
        return summary
    }

    /// The downloads that have not reached a final state: queued, running, paused or interrupted, in
    /// every journal this manager has open. Each is a handle made on demand: for a very large queue,
    /// prefer ``journalEntries(stateDirectory:)`` or ``download(id:)``.
    public var downloads: [Download] {
        catalog.openJournals.flatMap { journal in
            ((try? journal.unfinishedRecords()) ?? []).compactMap { id, _ in attach(id, in: journal) }
        }
    }

    /// The unfinished download with this id, in a journal this manager has open (its configured state
    /// directory, or one a download of this manager used): to follow a download restored from the
    /// journal or queued with ``enqueue(_:)``. `nil` when there is none, or it completed or failed.
    public func download(id: DownloadID) -> Download? {
        for journal in catalog.openJournals {
            if let found = attach(id, in: journal) { return found }
        }
        return nil
    }

    /// The handle of `id` if it is unfinished in `journal`: the live one, or one made from its row.
    private func attach(_ id: DownloadID, in journal: Journal) -> Download? {
        if let live = catalog.existingHandle(id), !live.hub.isClosed { return live }
        // Under the journal's lock: the loop's next event for it comes after the state shown here.
        return journal.locked { () -> Download? in
            guard let record = try? journal.record(for: id), record.isUnfinished,
                let url = URL(string: record.url)
            else { return nil }
            let request = PreparedRequest(
                url: url,
                destination: record.destination,
                id: id,
                stateDirectory: journal.directory,
                priority: record.priority
            )
            return publish(.waiting(record), for: request, in: journal, creatingHandle: true)
        }
    }

    /// Waits until no download of this manager is queued or running: each one completed, failed,
    /// was cancelled or is paused. Returns at once when the manager is shut down, and when it shuts
    /// down while waiting.
    public func waitUntilIdle() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            catalog.addIdleWaiter(waiter)
            if !reactor.submit(.checkIdle) { catalog.resumeIdleWaiters() }
        }
    }

    /// Pauses every unfinished download (writing what is buffered and keeping the partial files),
    /// ends their event sequences, and stops the loop thread. Queued downloads stay in the journal.
    /// Idempotent.
    public func shutdown() async {
        if catalog.markShutDown() { reactor.submit(.shutdown) }
        await reactor.waitUntilStopped()
        reactor.join()
    }

    // MARK: requests

    /// A request checked and resolved to its id and state directory.
    struct PreparedRequest {
        var url: URL
        var destination: String
        var id: DownloadID
        var stateDirectory: String
        var priority: Int
        var checksum: Checksum? = nil
        var expectedSize: Int64? = nil
    }

    /// What asking for a download did to its journal row.
    enum QueueOutcome {
        /// Queued now (new, or paused, interrupted or failed before, or to be fetched again).
        case queued(DownloadRecord)
        /// Already queued or running.
        case waiting(DownloadRecord)
        /// The destination holds the complete file.
        case complete(DownloadRecord)
    }

    private func prepare(_ request: DownloadRequest) throws(DownloadError) -> PreparedRequest {
        let url = try Self.validate(request.url)
        let destination = Self.standardizedPath(of: request.destination)
        var status = stat()
        if stat(destination, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR {
            throw DownloadError(
                code: .fileSystem,
                url: url.redactedString,
                errno: EISDIR,
                path: destination,
                detail: "the destination is a directory; give a file path inside it"
            )
        }
        let stateDirectory: String
        if let configured = configuredStateDirectory {
            stateDirectory = configured
        } else {
            let parent = destination[..<(destination.lastIndex(of: "/") ?? destination.startIndex)]
            stateDirectory = "\(parent)/.haul"
        }
        return PreparedRequest(
            url: url,
            destination: destination,
            id: DownloadID(url: url.absoluteString, destinationPath: destination),
            stateDirectory: stateDirectory,
            priority: request.priority,
            checksum: request.checksum,
            expectedSize: request.expectedSize
        )
    }

    /// `url.standardizedFileURL.path`, skipping Foundation's slow path for a path that is already
    /// absolute and plain (no `.`, `..` or empty components).
    static func standardizedPath(of url: URL) -> String {
        let path = url.path
        return isPlainAbsolutePath(path) ? path : url.standardizedFileURL.path
    }

    /// Whether `path` starts with `/` and has no empty, `.` or `..` component (nor a trailing `/`).
    static func isPlainAbsolutePath(_ path: String) -> Bool {
        let slash = UInt8(ascii: "/")
        let dot = UInt8(ascii: ".")
        var bytes = path.utf8.makeIterator()
        guard bytes.next() == slash else { return false }
        var length = 0
        var onlyDots = true
        while true {
            let byte = bytes.next()
            if byte == nil || byte == slash {
                if length == 0 || (onlyDots && length <= 2) { return false }
                if byte == nil { return true }
                length = 0
                onlyDots = true
            } else {
                length += 1
                if byte != dot { onlyDots = false }
            }
        }
    }

    /// Writes the journal row a request asks for. Call with the journal locked.
    private func enqueue(_ request: PreparedRequest, in journal: Journal) throws(DownloadError) -> QueueOutcome {
        let urlText = request.url.absoluteString
        // The common case, a download never seen: one insertion, no lookup.
        var record = fresh(request)
        record.queueSequence = catalog.nextQueueSequence()
        if let length = journal.adoptOrphanPartial(for: request.id) { record.bytesCommitted = length }
        if try journal.insertIfAbsent(record, for: request.id) { return .queued(record) }
        var existing = try journal.record(for: request.id)
        if let record = existing, record.url != urlText || record.destination != request.destination {
            // A different download under the same id: its partial file is not this one's.
            unlink(journal.partialPath(for: request.id))
            existing = nil
        }
        guard var record = existing else {
            return .queued(try requeue(fresh(request), id: request.id, in: journal))
        }
        record.priority = request.priority
        if record.state != .completed {
            record.expectedChecksum = request.checksum?.description
            record.expectedSize = request.expectedSize
        }
        switch record.state {
        case .queued, .running:
            try journal.save(record, for: request.id)
            return .waiting(record)
        case .paused, .interrupted, .failed:
            record.lastError = nil
            return .queued(try requeue(record, id: request.id, in: journal))
        case .completed:
            guard let total = record.totalBytes, Transfer.fileLength(request.destination) == total else {
                // The file recorded as complete is gone or changed at its destination: fetch it anew.
                unlink(journal.partialPath(for: request.id))
                return .queued(try requeue(fresh(request), id: request.id, in: journal))
            }
            guard configuration.revalidatesCompletedFiles, record.entityTag != nil || record.lastModified != nil else {
                return .complete(record)
            }
            record.revalidate = true
            return .queued(try requeue(record, id: request.id, in: journal))
        }
    }

    private func fresh(_ request: PreparedRequest) -> DownloadRecord {
        var record = DownloadRecord(url: request.url.absoluteString, destination: request.destination)
        record.priority = request.priority
        record.host = Self.hostKey(of: request.url)
        record.expectedChecksum = request.checksum?.description
        record.expectedSize = request.expectedSize
        return record
    }

    /// Puts a row at the end of its priority's queue.
    private func requeue(_ record: DownloadRecord, id: DownloadID, in journal: Journal) throws(DownloadError)
        -> DownloadRecord
    {
        var record = record
        record.state = .queued
        record.queueSequence = catalog.nextQueueSequence()
        try journal.save(record, for: id)
        return record
    }

    /// Shows an outcome on the download's handle: the live one, or (when `creatingHandle`) a new
    /// one. Call with the journal locked, so the loop's next event for it comes after.
    private func publish(
        _ outcome: QueueOutcome,
        for request: PreparedRequest,
        in journal: Journal,
        creatingHandle: Bool
    ) -> Download? {
        let record: DownloadRecord
        switch outcome {
        case .queued(let r), .waiting(let r), .complete(let r): record = r
        }
        let progress = record.progress
        let download: Download
        let isNew: Bool
        if creatingHandle {
            (download, isNew) = catalog.handle(request.id, replacingFinished: true) {
                makeHandle(for: request, progress: progress)
            }
        } else {
            guard let live = catalog.existingHandle(request.id) else { return nil }
            (download, isNew) = (live, false)
        }
        switch outcome {
        case .queued:
            download.hub.publish(.queued)
        case .waiting(let record):
            guard isNew else { break }
            switch record.state {
            case .paused, .interrupted: download.hub.publish(.paused(progress))
            default: download.hub.publish(.queued)
            }
        case .complete(let record):
            let total = record.totalBytes ?? 0
            download.hub.publish(
                .progress(DownloadProgress(bytesReceived: total, totalBytes: total, estimatedTimeRemaining: .zero))
            )
            download.hub.publish(.completed(URL(fileURLWithPath: request.destination, isDirectory: false)))
        }
        return download
    }

    private func makeHandle(for request: PreparedRequest, progress: DownloadProgress) -> Download {
        Download(
            id: request.id,
            url: request.url,
            destinationPath: request.destination,
            stateDirectoryPath: request.stateDirectory,
            reactor: reactor,
            census: catalog.census,
            progress: progress
        )
    }

    /// The key of per-host limits: `host:port`.
    static func hostKey(of url: URL) -> String {
        let host = url.host?.lowercased() ?? ""
        let port = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        return "\(host):\(port)"
    }

    /// Checks that a URL is one Haul can download.
    static func validate(_ url: URL) throws(DownloadError) -> URL {
        guard let scheme = url.scheme?.lowercased() else {
            throw DownloadError(code: .invalidURL, url: url.redactedString, detail: "it has no scheme such as https://")
        }
        guard scheme == "http" || scheme == "https" else {
            throw DownloadError(code: .unsupportedScheme, url: url.redactedString, detail: "the scheme '\(scheme)'")
        }
        guard let host = url.host, !host.isEmpty else {
            throw DownloadError(code: .invalidURL, url: url.redactedString, detail: "it has no host")
        }
        return url
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
