import FoundationEssentials
import Glibc
import HaulIO
import HaulTransfer
import HaulValues
import Logging
import Synchronization
import Tracing

/// What a manager's threads share: the open journals (which hold the queue), and the ``Download``
/// handles that callers hold.
///
/// A queued download is a journal row and nothing more. A ``Download`` object exists only while a
/// caller holds one or while the loop thread runs its transfer; the catalog keeps them weakly, so that
/// everyone asking for one id gets the same handle and the same events.
///
/// Locks: a journal's lock may be held while taking the catalog's locks, never the other way round;
/// the catalog's locks are leaves.
package final class Catalog: Sendable {
    /// This boot's id, which the journals it opens record (``Journal/currentBootID()``; tests give
    /// their own).
    let bootID: String
    /// How many handles and transfers exist.
    package let census = Census()
    /// The loop thread's writes, one transaction per turn in every journal.
    let writeBatch = WriteBatch()
    /// Every download's events, for ``DownloadManager/events``.
    package let feed = EventFeed()

    private final class WeakDownload: Sendable {
        nonisolated(unsafe) weak var download: LiveDownload?
        init(_ download: LiveDownload) { self.download = download }
    }

    private struct Handles {
        var byID: [DownloadID: WeakDownload] = [:]
        /// Entries at the last sweep of released handles.
        var liveAtLastSweep = 64
    }

    private struct Journals {
        var byDirectory: [String: Journal] = [:]
        /// Directories whose journal was closed as idle (``closeIfIdle(_:)``).
        var closedDirectories: Set<String> = []
        var lastSequence: Int64 = 0
        var isShutDown = false
    }

    private let handles = Mutex(Handles())
    private let idleWaiters = Mutex<[CheckedContinuation<Void, Never>]>([])
    private let journals = Mutex(Journals())
    private let opening = Mutex(())

    package init(bootID: String) {
        self.bootID = bootID
    }

    // MARK: journals

    /// The journal of `directory`, opened on first use (its interrupted downloads marked so).
    ///
    /// - Throws: `.shutdown` once the manager shut down; the journal's errors (`.journalLocked`…).
    package func journal(for directory: String) throws(DownloadError) -> Journal {
        if let journal = openJournal(for: directory) { return journal }
        // One opening at a time: a second connection to a journal being opened would find it locked.
        return try opening.withLock { _ throws(DownloadError) -> Journal in
            if let journal = openJournal(for: directory) { return journal }
            guard !isShutDown else { throw DownloadError(code: .shutdown, url: nil) }
            // The rows of this manager's downloads into streams, memory or nothing (a device, a FIFO,
            // standard output, `data(from:)`, `discard(from:)`) are in memory, since no other process
            // can continue them. Each statement commits alone there: nothing is made durable, so
            // nothing is gained by holding the journal for a loop turn while callers wait for it.
            let opened =
                directory == Journal.inMemoryKey
                ? Journal(inMemory: ())
                : try Journal(directory: directory, bootID: bootID, batch: writeBatch)
            journals.withLock { $0.byDirectory[directory] = opened }
            return opened
        }
    }

    /// Closes the journal of `directory` when nothing in it is unfinished, so that a manager without
    /// a state directory of its own (a journal beside each destination folder) does not keep one
    /// open per folder it ever wrote to: 2,000 folders held 4,039 descriptors and 417 MB. It opens
    /// again when asked for. The caller keeps the configured state directory's open.
    func closeIfIdle(_ directory: String) {
        // The journal in memory would take its rows along: it stays until the manager shuts down.
        guard directory != Journal.inMemoryKey, let journal = openJournal(for: directory) else { return }
        journal.confined {
            guard !journal.isClosed, (try? journal.hasUnfinishedRows()) == false else { return }
            // Closed (its lock released) before it leaves the map: a caller that finds the map empty
            // opens it again at once. Rows are written by the loop, which closes it: a caller's rows
            // sent meanwhile open it again (``journal(for:)``, on the loop).
            journal.close()
            journals.withLock { state in
                if state.byDirectory[directory] === journal { state.byDirectory[directory] = nil }
                state.closedDirectories.insert(directory)
            }
        }
    }

    /// The journal of `directory` if it is open.
    package func openJournal(for directory: String) -> Journal? {
        journals.withLock { $0.byDirectory[directory] }
    }

    /// The directories whose journals were closed as idle and are not open again.
    package var closedDirectories: [String] {
        journals.withLock { state in state.closedDirectories.filter { state.byDirectory[$0] == nil } }
    }

    /// Every open journal.
    package var openJournals: [Journal] {
        journals.withLock { Array($0.byDirectory.values) }
    }

    /// Closes every journal; later calls fail with `.shutdown`.
    func closeJournals() {
        let all = journals.withLock { state in
            state.isShutDown = true
            defer { state.byDirectory = [:] }
            return Array(state.byDirectory.values)
        }
        for journal in all { journal.close() }
    }

    /// Marks the manager shut down: no new downloads.
    package func markShutDown() -> Bool {
        journals.withLock { state in
            defer { state.isShutDown = true }
            return !state.isShutDown
        }
    }

    package var isShutDown: Bool { journals.withLock { $0.isShutDown } }

    /// The next place in the queue: increasing within this process, and (being microseconds since
    /// 1970 when the clock allows) after the entries of earlier processes.
    package func nextQueueSequence() -> Int64 {
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        return journals.withLock { state in
            state.lastSequence = max(state.lastSequence + 1, now)
            return state.lastSequence
        }
    }

    // MARK: handles

    /// The handle callers and the loop share for `id`, if one is alive.
    package func existingHandle(_ id: DownloadID) -> LiveDownload? {
        handles.withLock { $0.byID[id]?.download }
    }

    /// The live handle for `id`, or a new one from `make()` (``makeHandle(_:url:destinationPath:stateDirectoryPath:progress:controller:)``).
    /// A handle whose download ended is replaced (the download starts again).
    package func handle(_ id: DownloadID, make: () -> LiveDownload) -> (LiveDownload, isNew: Bool) {
        handles.withLock { state in
            if let existing = state.byID[id]?.download, !existing.hub.isClosed {
                return (existing, false)
            }
            let download = make()
            state.byID[id] = WeakDownload(download)
            if state.byID.count > 2 * state.liveAtLastSweep {
                state.byID = state.byID.filter { $0.value.download != nil }
                state.liveAtLastSweep = max(64, state.byID.count)
            }
            return (download, true)
        }
    }

    /// A new handle, counted in the census: the one place a ``Download`` is made. Not kept; pass it
    /// through ``handle(_:make:)`` for a download that has a row.
    package func makeHandle(
        _ id: DownloadID,
        url: URL,
        destinationPath: String,
        stateDirectoryPath: String,
        progress: DownloadProgress,
        controller: any DownloadController,
        keepsEarlyEvents: Bool = true
    ) -> LiveDownload {
        LiveDownload(
            id: id,
            url: url,
            destinationPath: destinationPath,
            stateDirectoryPath: stateDirectoryPath,
            controller: controller,
            census: census,
            progress: progress,
            feed: feed,
            keepsEarlyEvents: keepsEarlyEvents
        )
    }

    // MARK: idleness

    /// Adds a task waiting for the queue to drain.
    package func addIdleWaiter(_ waiter: CheckedContinuation<Void, Never>) {
        idleWaiters.withLock { $0.append(waiter) }
    }

    /// Resumes every task waiting for the queue to drain.
    package func resumeIdleWaiters() {
        let waiters = idleWaiters.withLock { waiters in
            defer { waiters = [] }
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Every live handle (for a shutdown, which ends their event sequences).
    var liveHandles: [LiveDownload] {
        handles.withLock { $0.byID.values.compactMap(\.download) }
    }
}
