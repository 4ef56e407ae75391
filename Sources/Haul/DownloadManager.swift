import Foundation
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
        /// How many downloads transfer at once; the others wait in a queue, holding no connection,
        /// file descriptor or buffer. Default 16.
        public var maxConcurrentDownloads: Int = 16
        /// How many bytes are collected before a write to the partial file (YYDownload's
        /// `kBufferSize`). Progress counts written bytes only. Default 128 KiB.
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
        /// The boot id journals are stamped with: this boot's, unless a test injects another.
        var bootID: String { bootIDOverride ?? Journal.currentBootID() }
        /// The longest wait for a connection. Default 30 s.
        public var connectTimeout: Duration = .seconds(30)
        /// How many redirects a download follows. Default 10.
        public var maximumRedirects: Int = 10
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
    private let scheduler: Scheduler

    private struct Registry {
        var downloads: [DownloadID: Download] = [:]
        var isShutDown = false
    }
    /// Shared with the scheduler, which forgets finished downloads from the loop thread.
    private final class SharedRegistry: Sendable {
        let state = Mutex(Registry())
    }
    private let shared = SharedRegistry()

    /// Starts a manager and its loop thread.
    ///
    /// - Throws: ``DownloadError`` with code `.internalError` when the loop cannot be created.
    public init(configuration: Configuration = Configuration()) throws {
        var configuration = configuration
        configuration.maxConcurrentDownloads = max(1, configuration.maxConcurrentDownloads)
        configuration.bufferSize = max(4096, configuration.bufferSize)
        self.configuration = configuration
        let reactor = try Reactor(
            logger: configuration.logger, idleConnections: max(16, configuration.maxConcurrentDownloads))
        self.reactor = reactor
        self.scheduler = Scheduler(configuration: configuration, reactor: reactor) { [shared] id in
            _ = shared.state.withLock { $0.downloads.removeValue(forKey: id) }
        }
        let handoff = try configuration.stateDirectory.map { directory throws(DownloadError) in
            try restore(from: directory.standardizedFileURL, reactor: reactor)
        }
        // Set only now: the reactor holds its delegate strongly until its loop ends.
        reactor.delegate = scheduler
        try reactor.start()
        if let handoff { reactor.submit(.adopt(handoff)) }
    }

    /// Opens the configured journal and creates a handle for each unfinished download in it.
    private func restore(from directory: URL, reactor: Reactor) throws(DownloadError) -> JournalHandoff {
        let journal = try Journal(directory: directory.path, bootID: configuration.bootID)
        var restored: [(Download, Bool)] = []
        for (id, record) in try journal.allRecords() {
            guard record.state != .completed, record.state != .failed,
                let url = URL(string: record.url)
            else { continue }
            let destination = URL(fileURLWithPath: record.destination)
            let download = Download(id: id, url: url, destination: destination, stateDirectory: directory, reactor: reactor)
            let startPaused = record.state == .paused || !configuration.resumesUnfinishedDownloads
            restored.append((download, startPaused))
        }
        shared.state.withLock { registry in
            for (download, _) in restored { registry.downloads[download.id] = download }
        }
        return JournalHandoff(journal: journal, downloads: restored)
    }

    deinit {
        // A manager dropped without `shutdown()`: the loop pauses every download and ends; its thread
        // (which keeps the reactor and scheduler alive until then) is detached rather than joined.
        reactor.submit(.shutdown)
        reactor.detach()
    }

    /// Starts (or joins) the download of `url` to `destination`.
    ///
    /// If the same URL is already downloading to the same destination, that ``Download`` is returned
    /// (and resumed, if it was paused: asking for a download again means wanting it).
    /// If `destination` already holds the complete file from an earlier download, nothing is
    /// transferred and the download completes at once.
    ///
    /// - Parameters:
    ///   - url: an absolute `http` or `https` URL.
    ///   - destination: a file URL; the file appears there only when whole.
    /// - Throws: ``DownloadError`` with code `.invalidURL`, `.unsupportedScheme`, `.fileSystem` (the
    ///   destination is a directory), or `.shutdown`.
    public func download(from url: URL, to destination: URL) throws -> Download {
        let checked = try Self.validate(url)
        let destination = destination.standardizedFileURL
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: destination.path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw DownloadError(
                code: .fileSystem, url: checked.redactedString, errno: EISDIR, path: destination.path,
                detail: "the destination is a directory; give a file path inside it")
        }
        let id = DownloadID(url: checked.absoluteString, destinationPath: destination.path)
        let stateDirectory =
            configuration.stateDirectory?.standardizedFileURL
            ?? destination.deletingLastPathComponent().appendingPathComponent(".haul", isDirectory: true)
        let (download, isNew) = try shared.state.withLock { registry throws(DownloadError) -> (Download, Bool) in
            guard !registry.isShutDown else {
                throw DownloadError(code: .shutdown, url: checked.redactedString)
            }
            if let existing = registry.downloads[id] { return (existing, false) }
            let download = Download(
                id: id, url: checked, destination: destination, stateDirectory: stateDirectory, reactor: reactor)
            registry.downloads[id] = download
            return (download, true)
        }
        if isNew {
            reactor.submit(.add(download))
        } else {
            // Queued after any earlier command (a restore included), so it finds the download in its
            // real state; resuming is a no-op unless it is paused.
            download.resume()
        }
        return download
    }

    /// Starts the download of the URL written in `string`; see ``download(from:to:)-(URL,_)``.
    ///
    /// - Throws: ``DownloadError`` with code `.invalidURL` when `string` is not a URL.
    public func download(from string: String, to destination: URL) throws -> Download {
        guard let url = URL(string: string.trimmingCharacters(in: .whitespaces)) else {
            throw DownloadError(code: .invalidURL, url: string, detail: "it could not be parsed")
        }
        return try download(from: url, to: destination)
    }

    /// The downloads that have not reached a final state, including those restored from the journal.
    public var downloads: [Download] {
        shared.state.withLock { Array($0.downloads.values) }
    }

    /// The unfinished download with this id (to re-attach to a download restored from the journal).
    public func download(id: DownloadID) -> Download? {
        shared.state.withLock { $0.downloads[id] }
    }

    /// Pauses every unfinished download (writing what is buffered and keeping the partial files),
    /// ends their event sequences, and stops the loop thread. Idempotent.
    public func shutdown() async {
        let first = shared.state.withLock { registry in
            defer { registry.isShutDown = true }
            return !registry.isShutDown
        }
        if first { reactor.submit(.shutdown) }
        await reactor.waitUntilStopped()
        reactor.join()
    }

    /// Checks that a URL is one Haul can download.
    static func validate(_ url: URL) throws(DownloadError) -> URL {
        let text = url.redactedString
        guard let scheme = url.scheme?.lowercased() else {
            throw DownloadError(code: .invalidURL, url: text, detail: "it has no scheme such as https://")
        }
        guard scheme == "http" || scheme == "https" else {
            throw DownloadError(code: .unsupportedScheme, url: text, detail: "the scheme '\(scheme)'")
        }
        guard let host = url.host, !host.isEmpty else {
            throw DownloadError(code: .invalidURL, url: text, detail: "it has no host")
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
