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
/// The handles by id, and the loop's table of the open journals, are the loop's alone: it takes no
/// lock to find them (callers reach the handles through the loop). The journals callers open are in
/// a table behind a lock, which the loop reads once per journal.
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

    /// What the loop keeps without a lock.
    private final class LoopTables: @unchecked Sendable {
        // @unchecked Sendable: read and written on the loop's thread alone (a debug build checks:
        // ``Catalog/loop``).
        var handles = Handles()
        /// The open journals the loop looked up. Only the loop closes a journal (``closeIfIdle(_:)``,
        /// ``closeJournals()``), and it takes the journal out of this table as it does.
        var journals: [String: Journal] = [:]
    }

    private struct Journals {
        var byDirectory: [String: Journal] = [:]
        /// Directories whose journal was closed as idle (``closeIfIdle(_:)``).
        var closedDirectories: Set<String> = []
        var lastSequence: Int64 = 0
        var isShutDown = false
    }

    private let loopTables = LoopTables()
    private let idleWaiters = Mutex<[CheckedContinuation<Void, Never>]>([])
    private let journals = Mutex(Journals())
    private let opening = Mutex(())

    package init(bootID: String) {
        self.bootID = bootID
    }

    /// The loop's tables; on the loop's thread only (or before it has one).
    private var loop: LoopTables {
        assert(feed.isOnLoopThread || !feed.hasLoopThread, "the catalog's handles are the loop's")
        return loopTables
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
        guard directory != Journal.inMemoryKey, let journal = openLoopJournal(for: directory) else { return }
        journal.confined {
            guard !journal.isClosed, (try? journal.hasUnfinishedRows()) == false else { return }
            // Closed (its lock released) before it leaves the map: a caller that finds the map empty
            // opens it again at once. Rows are written by the loop, which closes it: a caller's rows
            // sent meanwhile open it again (``journal(for:)``, on the loop).
            journal.close()
            loop.journals[directory] = nil
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

    /// The journal of `directory` for the loop, opened on first use (``journal(for:)``): from the
    /// loop's own table, without a lock, once it has looked it up.
    ///
    /// - Throws: as ``journal(for:)``.
    func loopJournal(for directory: String) throws(DownloadError) -> Journal {
        if let journal = loop.journals[directory] { return journal }
        let opened = try journal(for: directory)
        loop.journals[directory] = opened
        return opened
    }

    /// The journal of `directory` for the loop, if it is open: from the loop's own table, without a
    /// lock, once it has looked it up.
    func openLoopJournal(for directory: String) -> Journal? {
        if let journal = loop.journals[directory] { return journal }
        guard let opened = openJournal(for: directory) else { return nil }
        loop.journals[directory] = opened
        return opened
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
        loop.journals = [:]
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

    /// The handle everyone asking for `id` shares, if one is alive. On the loop.
    package func existingHandle(_ id: DownloadID) -> LiveDownload? {
        loop.handles.byID[id]?.download
    }

    /// The live handle for `id`, or a new one from `make()` (``makeHandle(_:url:destinationPath:stateDirectoryPath:progress:controller:keepsEarlyEvents:)``,
    /// or one a caller made and handed to the loop). A handle whose download ended is replaced (the
    /// download starts again). On the loop.
    package func handle(_ id: DownloadID, make: () -> LiveDownload) -> (LiveDownload, isNew: Bool) {
        let tables = loop
        if let existing = tables.handles.byID[id]?.download, !existing.hub.isClosed {
            return (existing, false)
        }
        let download = make()
        tables.handles.byID[id] = WeakDownload(download)
        if tables.handles.byID.count > 2 * tables.handles.liveAtLastSweep {
            tables.handles.byID = tables.handles.byID.filter { $0.value.download != nil }
            tables.handles.liveAtLastSweep = max(64, tables.handles.byID.count)
        }
        return (download, true)
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

    /// Every live handle (for a shutdown, which ends their event sequences). On the loop.
    var liveHandles: [LiveDownload] {
        loop.handles.byID.values.compactMap(\.download)
    }
}
