import CHaul
import FoundationEssentials
import Glibc
import HaulValues
import Synchronization

/// The embedded SQLite database of one state directory: a row per download (`journal.sqlite`), next
/// to the partial files (`<id>.part`).
///
/// WAL mode; any number of managers, in one process or several, open a state directory's journal
/// at once (``JournalOwnership``): each row that is queued or running names the one that queued or
/// runs it (its ``owner``), only that one admits it, and the rows of an owner that is gone are taken
/// back by the next one that looks (``releaseRowsOfGoneOwners()``). Writers wait for each other
/// (a busy handler of short steps) for the millisecond or two a loop turn's transaction lasts. Readers
/// (``entries(directory:)``, a listing during a run) open it read-only. The schema carries a version
/// (`PRAGMA user_version`) and is migrated forward on open.
///
/// The journal is the queue: a queued download is a row and nothing else; the loop thread takes the
/// next row (highest priority, then first in) when a slot frees. A running manager's loop is the
/// journal's one user (callers' rows reach it as commands: ``JournalConfinement``); ``confined(_:)``
/// groups several calls into one step.
package final class Journal: @unchecked Sendable {
    // @unchecked Sendable: one thread at a time uses `database`, `statements` and `queries`
    // (``JournalConfinement``; a debug build checks it).

    /// The schema this build writes.
    static let schemaVersion: Int32 = 16
    package static let fileName = "journal.sqlite"

    package let directory: String
    package let path: String
    var database: OpaquePointer?
    /// The state directory's lock and this open's own, held from the start of `init` until
    /// ``close()``.
    private var ownership: JournalOwnership?
    /// This open's token, written as the `owner` of every row it queues or runs.
    package let owner: Int64
    var statements: [String: OpaquePointer] = [:]
    let confinement = JournalConfinement()
    /// The loop thread's per-turn transaction, if this journal takes part (see ``WriteBatch``).
    let batch: WriteBatch?
    /// Whether the loop thread's transaction is open; the loop thread then holds `lock` until it
    /// commits.
    var batchOpen = false
    /// The loop thread's row writes since its last durable commit, the last one of each row: what a
    /// commit that fails (a full disk) would lose (``Journal+Unwritten.swift``). Loop thread only.
    var unwritten: [DownloadID: UnwrittenRow] = [:]
    /// Whether a commit of the loop thread's failed, or its transaction was rolled back: the next
    /// one writes `unwritten` again first. Loop thread only.
    package internal(set) var lostCommit = false

    /// The rows of this process's downloads into streams, memory or nothing, which no other
    /// process can continue: held in Swift (``MemoryRows``), no database, no file, no lock, no owner
    /// but this open, no partial file.
    package let isInMemory: Bool
    /// Where the rows are (``RowStore``): ``MemoryRows``, or ``SQLiteRows`` on ``database``; `nil`
    /// once closed.
    private var rowStore: (any RowStore)?

    /// Whether opening found the journal written in another boot (and cut partial files back to their
    /// last synced checkpoint).
    var recoveredFromReboot = false

    /// Partial files found beside a journal that did not exist yet (a journal deleted, its partial
    /// files kept), by id: their length. See ``adoptOrphanPartial(for:)``.
    var orphanPartials: [String: Int64] = [:]

    /// This boot's id (`/proc/sys/kernel/random/boot_id`), or "unknown".
    package static func currentBootID() -> String {
        let text = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        let id = text.trimmingWhitespace
        return id.isEmpty ? "unknown" : id
    }

    /// What a manager's journal in memory is known by where a journal on disk is known by its state
    /// directory (SQLite's name for a database in memory). No state directory is this (they are
    /// absolute paths), and nothing is made, opened or removed under it: a journal in memory has no
    /// folder and no partial files (``partialPath(for:)`` is `nil`).
    package static let inMemoryKey = ":memory:"

    /// A journal of this process's downloads alone (``isInMemory``), known by ``inMemoryKey``.
    package init(inMemory: ()) {
        self.directory = Self.inMemoryKey
        self.batch = nil
        self.path = Self.inMemoryKey
        self.isInMemory = true
        owner = Int64.random(in: 1...Int64.max)
        rowStore = MemoryRows(owner: owner)
    }

    /// Opens (creating when missing) the journal of `directory`, which is created too.
    ///
    /// - Parameter bootID: this boot's id; when the journal was last written in another boot, every
    ///   unfinished partial file is cut back to the bytes that were synced before the journal said so.
    ///   - batch: groups the writes of the loop thread into one transaction per loop turn.
    ///   - exclusive: no other manager may have it open meanwhile (`.journalLocked` while one has).
    package init(
        directory: String,
        bootID: String = Journal.currentBootID(),
        batch: WriteBatch? = nil,
        exclusive: Bool = false
    ) throws(DownloadError) {
        self.directory = directory
        self.batch = batch
        self.path = "\(directory)/\(Self.fileName)"
        self.isInMemory = false
        // Private: the journal and the partial files are nobody else's to read.
        // (ENOTDIR: a link or a file is there, which the check below names.)
        if let error = FilePath.makeDirectories(directory, mode: 0o700), error != ENOTDIR {
            throw DownloadError(
                code: .fileSystem,
                url: nil,
                errno: error,
                path: directory,
                detail: "could not create the state directory"
            )
        }
        try PrivateFile.checkFolder(directory)
        let ownership = try JournalOwnership(directory: directory, journalPath: path, exclusive: exclusive)
        owner = ownership.token
        self.ownership = consume ownership
        if access(path, F_OK) != 0 { orphanPartials = Self.partialFiles(in: directory) }
        try Self.makePrivate(path)
        var database: OpaquePointer?
        // NOFOLLOW: the checks above found no link; none is followed if one appears meanwhile.
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        // A WAL index's blocks allocated before SQLite maps them: a full disk is an error, not SIGBUS.
        _ = CHaul_sqlite_allocate_shared_memory()
        let status = sqlite3_open_v2(path, &database, flags, nil)
        self.database = database
        guard status == SQLITE_OK else {
            let message = database.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            let systemError = database.map { sqlite3_system_errno($0) } ?? 0
            close()
            // "unable to open database file" alone hides the cause (no descriptor left, a folder
            // where the file should be, no permission): the system's error says it.
            if status & 0xff == SQLITE_CANTOPEN, systemError != 0 {
                var error = DownloadError(
                    code: .fileSystem,
                    url: nil,
                    errno: systemError,
                    path: path,
                    detail: "could not open the journal"
                )
                error.nothingKept = true
                throw error
            }
            throw DownloadError(code: .journal, url: nil, path: path, detail: message)
        }
        rowStore = SQLiteRows(journal: self)
        do {
            try prepareSchema()
            // One transaction: a manager opening it at the same time finds the boot recorded and
            // the partial files cut, or does it itself, never cuts a file this one writes again.
            try transaction { () throws(DownloadError) in
                try recoverIfRebooted(bootID: bootID)
                // Whatever was queued, waiting or running for a manager that is gone is interrupted.
                try releaseRowsOfGoneOwners()
            }
        } catch {
            close()
            throw error
        }
        opened = true
    }

    /// Set once the journal is open: its opening runs on the opener's thread before anyone else
    /// can have it (``JournalConfinement``).
    private var opened = false

    deinit { close(inDeinit: true) }

    /// Creates the database file readable and writable by its owner only, or makes an existing one
    /// so (journals of earlier versions were 0644), with its `-wal` and `-shm` (SQLite gives them the
    /// database's mode when it creates them). Each is checked as ``PrivateFile`` opens files: a link,
    /// a FIFO or another user's file at any of the three names is refused, its target untouched. None
    /// is opened for reading or writing (``PrivateFile/inspect(_:creating:)``): this process may have
    /// the journal open already, and closing a descriptor of its files would drop SQLite's locks.
    static func makePrivate(_ path: String) throws(DownloadError) {
        for suffix in ["", "-wal", "-shm"] {
            // None yet (but the database, made here, and on btrfs the WAL index SQLite maps):
            // sqlite3_open_v2 makes them, or says why not.
            _ = try PrivateFile.inspect(path + suffix, creating: suffix.isEmpty, mapped: suffix == "-shm")
        }
    }

    /// The journal's rows. Call inside ``confined(_:)``.
    ///
    /// - Throws: once the journal is closed.
    func rows() throws(DownloadError) -> any RowStore {
        guard let rowStore else { throw closedError }
        return rowStore
    }

    /// Runs `body` with the journal to itself (``JournalConfinement``: no other thread may use it
    /// meanwhile, which a debug build checks).
    package func confined<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        acquire()
        defer { confinement.leave() }
        return try body()
    }

    /// SQLite's page cache, in KiB (as `PRAGMA cache_size` takes it, negated). Measured: 200,000 rows
    /// enqueued in 3.8 s with 8 MiB, 4.8 s with 1 MiB; 10,000 downloads at 100 at once peaked at 1.9 MB
    /// more RSS with 8 MiB held all along.
    static let cacheKiB = (normal: -1024, bulk: -8192)
    /// ``beginBulkWrite()`` calls not yet ended.
    var bulkWriters = 0

    /// A bulk enqueue starts: the page cache grows until the last one ends (``endBulkWrite()``).
    package func beginBulkWrite() {
        confined {
            bulkWriters += 1
            if bulkWriters == 1, database != nil { try? execute("PRAGMA cache_size = \(Self.cacheKiB.bulk)") }
        }
    }

    /// A bulk enqueue ended: the last one shrinks the page cache again.
    package func endBulkWrite() {
        confined {
            bulkWriters -= 1
            if bulkWriters == 0, database != nil { try? execute("PRAGMA cache_size = \(Self.cacheKiB.normal)") }
        }
    }

    /// Whether ``transactionOfItsOwn(_:)`` runs: the loop's writes inside it do not open the batch.
    var ownTransactionOpen = false
    /// Who waits for the loop's open batch to commit (``recordPlacingsInTurn(_:answer:)``): told
    /// once it commits, or with why it did not. Loop thread only.
    var commitWaiters: [@Sendable (DownloadError?) -> Void] = []

    /// Takes `lock`. While a manager runs, only its loop thread takes it (the callers' rows, the
    /// disk lanes' placings and the callers' looks at rows all go through the loop), so it is not
    /// contended; another thread would wait for the loop's turn to commit.
    func acquire() {
        confinement.enter()
        #if DEBUG
            // The check costs a release build nothing: its count is a debug build's alone.
            if opened, let batch, batch.hasThread, !batch.isBatchingThread { confinement.noteOffLoop() }
        #endif
    }

    /// Calls made off the loop of the manager running it, in a debug build (0 in a release one):
    /// none, if the journal is its loop's (``JournalConfinement``).
    package var offLoopEntries: Int {
        #if DEBUG
            confinement.offLoop.load(ordering: .relaxed)
        #else
            0
        #endif
    }

    /// ``transaction(_:)`` calls open inside the batch (which must not be committed under them).
    var savepoints = 0
    /// A commit that failed before the turn's end (a transaction of the loop's own committed the
    /// batch first, or SQLite undid it), reported by the next ``commitBatch()``.
    var deferredCommitError: DownloadError?

    /// Runs a write inside the journal: on the batching thread it joins the turn's transaction.
    func writing<T>(_ body: () throws(DownloadError) -> T) throws(DownloadError) -> T {
        acquire()
        defer { confinement.leave() }
        try joinBatch()
        do throws(DownloadError) {
            return try body()
        } catch {
            if batchOpen { lostCommit = true }  // the write is in `unwritten`: the next transaction makes it
            noteIfBatchRolledBack(error)
            throw error
        }
    }

    /// On the batching thread, opens the turn's transaction unless it is open. Call inside the journal (``Journal/confined(_:)``).
    func joinBatch() throws(DownloadError) {
        guard !batchOpen, !ownTransactionOpen, let batch, batch.isBatchingThread, database != nil else { return }
        try execute("BEGIN IMMEDIATE")
        batchOpen = true
        confinement.enter()  // held until commitBatch(); already held by this thread, so never waits
        batch.opened(self)
        if lostCommit { rewriteUnwritten() }
    }

    /// Commits the loop thread's transaction and lets other threads in again. Loop thread only.
    ///
    /// - Throws: when the commit failed: the turn's rows are lost (the partial files they describe
    ///   are not).
    func commitBatch() throws(DownloadError) {
        let deferred = deferredCommitError
        deferredCommitError = nil
        if batchOpen {
            batchOpen = false
            defer { confinement.leave() }
            do throws(DownloadError) {
                try execute("COMMIT")
            } catch {
                try? execute("ROLLBACK")
                lostCommit = true
                answerCommitWaiters(error)
                throw error
            }
            answerCommitWaiters(nil)
            if !lostCommit { unwritten.removeAll(keepingCapacity: true) }
        }
        if let deferred { throw deferred }
    }

    /// Whether ``close()`` was called. Read inside the journal.
    package var isClosed: Bool { rowStore == nil }

    /// Releases the database and its lock.
    package func close() { close(inDeinit: false) }

    /// ``close()``; from `deinit`, nothing goes through ``rows()`` (whose ``SQLiteRows`` holds this
    /// journal unowned, unreadable once its deinitialization began).
    private func close(inDeinit: Bool) {
        acquire()
        defer { confinement.leave() }
        try? commitBatch()
        if lostCommit, !inDeinit { writeUnwrittenAtClose() }
        removeUnadoptedPartials()
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        queries = queries.map { _ in nil }
        if let database { sqlite3_close_v2(database) }
        database = nil
        rowStore = nil
        ownership = nil
    }

    /// The prepared statements of ``Query``, by raw value.
    var queries = [OpaquePointer?](repeating: nil, count: Query.allCases.count)
}
