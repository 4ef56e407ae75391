import CHaul
import FoundationEssentials
import Glibc
import Synchronization

/// The embedded SQLite database of one state directory: a row per download (`journal.sqlite`), next
/// to the partial files (`<id>.part`).
///
/// WAL mode, exclusive locking: one process at a time owns a state directory; a second one gets
/// ``DownloadError/Code-swift.struct/journalLocked`` instead of a corrupted journal. The schema carries
/// a version (`PRAGMA user_version`) and is migrated forward on open.
///
/// The journal is the queue: a queued download is a row and nothing else; the loop thread takes the
/// next row (highest priority, then first in) when a slot frees. Callers' threads enqueue and the loop
/// thread admits, so every method holds the journal's lock; ``locked(_:)`` groups several calls into
/// one atomic step.
final class Journal: @unchecked Sendable {
    // @unchecked Sendable: every use of `database`, `statements` and `queries` happens under `lock`.

    /// The schema this build writes.
    static let schemaVersion: Int32 = 3
    static let fileName = "journal.sqlite"

    let directory: String
    let path: String
    private var database: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    private let lock = RecursiveLock()
    /// Threads waiting for `lock`: the loop thread then commits its open batch at its next write
    /// instead of at the end of its turn, so that a caller waits for one statement, not a whole turn.
    private let contenders = Atomic<Int>(0)
    /// The loop thread's per-turn transaction, if this journal takes part (see ``WriteBatch``).
    private let batch: WriteBatch?
    /// Whether the loop thread's transaction is open; the loop thread then holds `lock` until it
    /// commits.
    private var batchOpen = false

    /// Whether opening found the journal written in another boot (and cut partial files back to their
    /// last synced checkpoint).
    private(set) var recoveredFromReboot = false

    /// Partial files found beside a journal that did not exist yet (a journal deleted, its partial
    /// files kept), by id: their length. See ``adoptOrphanPartial(for:)``.
    private var orphanPartials: [String: Int64] = [:]

    /// This boot's id (`/proc/sys/kernel/random/boot_id`), or "unknown".
    static func currentBootID() -> String {
        let text = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        let id = text.trimmingWhitespace
        return id.isEmpty ? "unknown" : id
    }

    /// Opens (creating when missing) the journal of `directory`, which is created too.
    ///
    /// - Parameter bootID: this boot's id; when the journal was last written in another boot, every
    ///   unfinished partial file is cut back to the bytes that were synced before the journal said so.
    ///   - batch: groups the writes of the loop thread into one transaction per loop turn.
    init(directory: String, bootID: String = Journal.currentBootID(), batch: WriteBatch? = nil) throws(DownloadError) {
        self.directory = directory
        self.batch = batch
        self.path = "\(directory)/\(Self.fileName)"
        if let error = FilePath.makeDirectories(directory) {
            throw DownloadError(
                code: .fileSystem,
                url: nil,
                errno: error,
                path: directory,
                detail: "could not create the state directory"
            )
        }
        if access(path, F_OK) != 0 { orphanPartials = Self.partialFiles(in: directory) }
        var database: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
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
        do {
            try prepareSchema()
            try recoverIfRebooted(bootID: bootID)
            // Whatever was queued or running belonged to a process that is gone.
            try execute("UPDATE downloads SET state = 'interrupted' WHERE state IN ('queued', 'running')")
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// The `*.part` files of `directory` and their lengths.
    private static func partialFiles(in directory: String) -> [String: Int64] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var found: [String: Int64] = [:]
        for name in names where name.hasSuffix(".part") {
            guard let length = FilePath.fileLength("\(directory)/\(name)") else { continue }
            found[String(name.dropLast(5))] = length
        }
        return found
    }

    /// The length of a partial file this journal found without a row when it was created, once: a new
    /// row for `id` records it, so that the download resumes it (its range still checked; with no
    /// validator known, a changed file can only be told by its length). Call holding the lock.
    func adoptOrphanPartial(for id: DownloadID) -> Int64? {
        guard !orphanPartials.isEmpty else { return nil }
        return orphanPartials.removeValue(forKey: id.rawValue)
    }

    /// Runs `body` with the journal to itself: no other thread's call comes in between.
    func locked<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        acquire()
        defer { lock.unlock() }
        return try body()
    }

    /// SQLite's page cache, in KiB (as `PRAGMA cache_size` takes it, negated). Measured: 200,000 rows
    /// enqueued in 3.8 s with 8 MiB, 4.8 s with 1 MiB; 10,000 downloads at 100 at once peaked at 1.9 MB
    /// more RSS with 8 MiB held all along.
    private static let cacheKiB = (normal: -1024, bulk: -8192)
    /// ``beginBulkWrite()`` calls not yet ended.
    private var bulkWriters = 0

    /// A bulk enqueue starts: the page cache grows until the last one ends (``endBulkWrite()``).
    func beginBulkWrite() {
        locked {
            bulkWriters += 1
            if bulkWriters == 1, database != nil { try? execute("PRAGMA cache_size = \(Self.cacheKiB.bulk)") }
        }
    }

    /// A bulk enqueue ended: the last one shrinks the page cache again.
    func endBulkWrite() {
        locked {
            bulkWriters -= 1
            if bulkWriters == 0, database != nil { try? execute("PRAGMA cache_size = \(Self.cacheKiB.normal)") }
        }
    }

    /// The page cache's size now, in KiB.
    var pageCacheKiB: Int {
        locked { -(Int((try? queryText("PRAGMA cache_size")) ?? "") ?? 0) }
    }

    /// Runs `body` in one SQLite transaction (one commit for many rows), holding the lock. Inside the
    /// loop thread's open batch, `body` is a savepoint of it.
    func transaction<T>(_ body: () throws(DownloadError) -> T) throws(DownloadError) -> T {
        try locked { () throws(DownloadError) -> T in
            try joinBatch()
            if batchOpen {
                try execute("SAVEPOINT haul_transaction")
                savepoints += 1
                defer { savepoints -= 1 }
                do throws(DownloadError) {
                    let result = try body()
                    try execute("RELEASE haul_transaction")
                    return result
                } catch {
                    try? execute("ROLLBACK TO haul_transaction")
                    try? execute("RELEASE haul_transaction")
                    throw error
                }
            }
            try execute("BEGIN IMMEDIATE")
            do throws(DownloadError) {
                let result = try body()
                try execute("COMMIT")
                return result
            } catch {
                try? execute("ROLLBACK")
                throw error
            }
        }
    }

    /// Takes `lock`, counting this thread as a contender while it waits.
    private func acquire() {
        if lock.try() { return }
        contenders.add(1, ordering: .relaxed)
        lock.lock()
        contenders.subtract(1, ordering: .relaxed)
    }

    /// After a write of the batching thread: when another thread waits for the journal, commit now.
    /// Call holding `lock` (the caller's own hold is released after).
    private func yieldIfContended() {
        guard batchOpen, savepoints == 0, contenders.load(ordering: .relaxed) > 0 else { return }
        do {
            try commitBatch()
        } catch {
            deferredCommitError = error
        }
    }

    /// How many threads wait for the journal now.
    var waitingThreads: Int { contenders.load(ordering: .relaxed) }

    /// ``transaction(_:)`` calls open inside the batch (which must not be committed under them).
    private var savepoints = 0
    /// A commit that failed in ``yieldIfContended()``, reported by the next ``commitBatch()``.
    private var deferredCommitError: DownloadError?

    /// Runs a write with the lock held: on the batching thread it joins the turn's transaction, and
    /// lets a waiting thread in afterwards (see ``yieldIfContended()``).
    private func writing<T>(_ body: () throws(DownloadError) -> T) throws(DownloadError) -> T {
        acquire()
        defer { lock.unlock() }
        try joinBatch()
        defer { yieldIfContended() }
        return try body()
    }

    /// On the batching thread, opens the turn's transaction unless it is open. Call holding `lock`.
    private func joinBatch() throws(DownloadError) {
        guard !batchOpen, let batch, batch.isBatchingThread, database != nil else { return }
        try execute("BEGIN IMMEDIATE")
        batchOpen = true
        lock.lock()  // held until commitBatch(); already held by this thread, so never waits
        batch.opened(self)
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
            defer { lock.unlock() }
            do throws(DownloadError) {
                try execute("COMMIT")
            } catch {
                try? execute("ROLLBACK")
                throw error
            }
        }
        if let deferred { throw deferred }
    }

    /// Releases the database and its lock.
    func close() {
        acquire()
        defer { lock.unlock() }
        try? commitBatch()
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        queries = queries.map { _ in nil }
        if let database { sqlite3_close_v2(database) }
        database = nil
    }

    // MARK: schema

    private func prepareSchema() throws(DownloadError) {
        sqlite3_busy_timeout(database, 0)
        // Take the lock now (a write transaction), so a second process fails here, clearly.
        try execute("PRAGMA locking_mode = EXCLUSIVE")

        let mode = try queryText("PRAGMA journal_mode = WAL")
        if mode?.lowercased() != "wal" {
            throw DownloadError(
                code: .journal,
                url: nil,
                path: path,
                detail: "the journal cannot use WAL mode (\(mode ?? "?"))"
            )
        }
        try execute("PRAGMA synchronous = NORMAL")
        // Ids are hashes, so queued rows land at random pages of the id index, and each commit and
        // each checkpoint rewrites every page it touched. Measured on 200,000 queued rows: 512-row
        // commits with the default 1,000-page checkpoints wrote 1.27 GB; 2,048-row commits
        // (`enqueue`) with 4,000-page checkpoints, 0.56 GB. The WAL is cut back to 16 MiB after them.
        // The page cache is small but while a bulk enqueue runs (see ``beginBulkWrite()``).
        try execute("PRAGMA cache_size = \(Self.cacheKiB.normal)")
        try execute("PRAGMA wal_autocheckpoint = 4000")
        try execute("PRAGMA journal_size_limit = 16777216")
        try execute("BEGIN IMMEDIATE")
        do throws(DownloadError) {
            let versionText = try queryText("PRAGMA user_version")
            let version = versionText.flatMap { Int32($0) } ?? 0
            if version > Self.schemaVersion {
                throw DownloadError(
                    code: .journal,
                    url: nil,
                    path: path,
                    detail: "it was written by a newer Haul (schema \(version), this one knows \(Self.schemaVersion))"
                )
            }
            if version < 1 { try migrateToVersion1() }
            if version < 2 { try migrateToVersion2() }
            if version < 3 { try migrateToVersion3() }
            try execute("PRAGMA user_version = \(Self.schemaVersion)")
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    private func migrateToVersion1() throws(DownloadError) {
        try execute(
            """
            CREATE TABLE IF NOT EXISTS downloads (
                id TEXT PRIMARY KEY NOT NULL,
                url TEXT NOT NULL,
                destination TEXT NOT NULL,
                total_bytes INTEGER,
                etag TEXT,
                last_modified TEXT,
                bytes_committed INTEGER NOT NULL DEFAULT 0,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                last_error TEXT,
                priority INTEGER NOT NULL DEFAULT 0,
                expected_checksum TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )
            """
        )
    }

    /// Version 2: synced checkpoints and the boot they were written in.
    private func migrateToVersion2() throws(DownloadError) {
        try execute("ALTER TABLE downloads ADD COLUMN bytes_synced INTEGER NOT NULL DEFAULT 0")
        try execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)")
    }

    /// Version 3: the journal is the queue (order, host, revalidation, retries and their backoff;
    /// "interrupted" downloads) and knows an expected size.
    private func migrateToVersion3() throws(DownloadError) {
        try execute("ALTER TABLE downloads ADD COLUMN queue_seq INTEGER NOT NULL DEFAULT 0")
        try execute("ALTER TABLE downloads ADD COLUMN host TEXT NOT NULL DEFAULT ''")
        try execute("ALTER TABLE downloads ADD COLUMN revalidate INTEGER NOT NULL DEFAULT 0")
        try execute("ALTER TABLE downloads ADD COLUMN failures INTEGER NOT NULL DEFAULT 0")
        try execute("ALTER TABLE downloads ADD COLUMN retry_at REAL NOT NULL DEFAULT 0")
        try execute("ALTER TABLE downloads ADD COLUMN expected_size INTEGER")
        try execute("UPDATE downloads SET queue_seq = CAST(created_at * 1000000 AS INTEGER)")
        for (id, var record) in try records(where: "host = ''") {
            guard let url = URL(string: record.url) else { continue }
            record.host = url.hostKey
            try save(record, for: id)
        }
        try execute(
            "CREATE INDEX IF NOT EXISTS downloads_queue ON downloads (priority DESC, queue_seq) WHERE state = 'queued'"
        )
    }

    /// After a reboot, bytes that were only in the page cache may be lost or garbage: cut every
    /// unfinished partial file back to its last synced checkpoint.
    private func recoverIfRebooted(bootID: String) throws(DownloadError) {
        let previous = try queryText("SELECT value FROM meta WHERE key = 'boot_id'")
        if let previous, previous != bootID {
            recoveredFromReboot = true
            for (id, var record) in try records(where: Self.mayHavePartial) {
                let path = partialPath(for: id)
                var status = stat()
                guard stat(path, &status) == 0 else { continue }
                if Int64(status.st_size) > record.bytesSynced {
                    guard truncate(path, off_t(record.bytesSynced)) == 0 else {
                        throw DownloadError(
                            code: .fileSystem,
                            url: nil,
                            errno: Glibc.errno,
                            path: path,
                            detail: "truncate failed"
                        )
                    }
                }
                record.bytesCommitted = min(Int64(status.st_size), record.bytesSynced)
                try save(record, for: id)
            }
        }
        if previous != bootID {
            try execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('boot_id', '\(bootID.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "''"))')"
            )
        }
    }

    /// Rows that may have a partial file: all but the completed ones and those queued that never ran.
    private static let mayHavePartial =
        "state != 'completed' AND NOT (state = 'queued' AND attempts = 0 AND bytes_committed = 0 AND bytes_synced = 0)"

    /// Records that the first `bytes` of a download's partial file are on stable storage.
    func recordSynced(_ id: DownloadID, bytes: Int64) throws(DownloadError) {
        try writing { () throws(DownloadError) in
            let statement = try prepared(.recordSynced)
            defer { sqlite3_reset(statement) }
            CHaul_sqlite_bind_text(statement, 1, id.rawValue)
            sqlite3_bind_int64(statement, 2, bytes)
            guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("write") }
        }
    }

    // MARK: rows

    func partialPath(for id: DownloadID) -> String { "\(directory)/\(id.rawValue).part" }

    private static let columns = """
        url, destination, total_bytes, etag, last_modified, bytes_committed, state, attempts, last_error,
        priority, expected_checksum, bytes_synced, queue_seq, host, revalidate, id, failures, retry_at,
        expected_size
        """

    /// The stored record, or `nil` when there is none.
    func record(for id: DownloadID) throws(DownloadError) -> DownloadRecord? {
        acquire()
        defer { lock.unlock() }
        return try storedRecord(for: id)
    }

    /// The stored record, or `nil`. Call holding `lock`.
    private func storedRecord(for id: DownloadID) throws(DownloadError) -> DownloadRecord? {
        let statement = try prepared(.recordByID)
        defer { sqlite3_reset(statement) }
        CHaul_sqlite_bind_text(statement, 1, id.rawValue)
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return Self.record(from: statement)
        case SQLITE_DONE: return nil
        default: throw failure("read")
        }
    }

    /// Every stored download, oldest first.
    func allRecords() throws(DownloadError) -> [(DownloadID, DownloadRecord)] {
        try records(where: "1")
    }

    /// The downloads that still have work to do, oldest first.
    func unfinishedRecords() throws(DownloadError) -> [(DownloadID, DownloadRecord)] {
        try records(where: "state NOT IN ('completed', 'failed')")
    }

    private func records(where condition: String) throws(DownloadError) -> [(DownloadID, DownloadRecord)] {
        acquire()
        defer { lock.unlock() }
        let statement = try prepared("SELECT \(Self.columns) FROM downloads WHERE \(condition) ORDER BY created_at, id")
        defer { sqlite3_reset(statement) }
        var rows: [(DownloadID, DownloadRecord)] = []
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW:
                rows.append((DownloadID(rawValue: Self.text(statement, 15) ?? ""), Self.record(from: statement)))
            case SQLITE_DONE:
                return rows
            default:
                throw failure("read")
            }
        }
    }

    /// How far past saturated hosts the queue is searched for another host's download.
    static let hostSearchWindow = 256

    /// The queue's head: the queued download with the highest priority, first in within it, that may
    /// run at `now` (seconds since 1970; a retry waits for its time) and whose host is not in
    /// `excludedHosts`.
    ///
    /// With hosts excluded, only the first ``hostSearchWindow`` queued rows are searched (a bounded
    /// cost per admission, whatever the queue's length); `blocked` then says that rows were passed
    /// over for their host.
    func nextQueued(
        at now: Double,
        excludingHosts excludedHosts: Set<String> = []
    ) throws(DownloadError) -> (head: QueueHead?, blocked: Bool) {
        acquire()
        defer { lock.unlock() }
        let statement = try prepared(.queueHead)
        defer { sqlite3_reset(statement) }
        sqlite3_bind_double(statement, 1, now)
        sqlite3_bind_int64(statement, 2, excludedHosts.isEmpty ? 1 : Int64(Self.hostSearchWindow))
        var blocked = false
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW:
                if !excludedHosts.isEmpty, excludedHosts.contains(Self.text(statement, 13) ?? "") {
                    blocked = true
                    continue
                }
                let record = Self.record(from: statement)
                let head = QueueHead(
                    id: DownloadID(rawValue: Self.text(statement, 15) ?? ""),
                    place: QueuePlace(priority: record.priority, sequence: record.queueSequence),
                    record: record,
                    changes: sqlite3_total_changes64(database)
                )
                return (head, blocked)
            case SQLITE_DONE:
                return (nil, blocked)
            default:
                throw failure("read")
            }
        }
    }

    /// The queue's head as ``nextQueued(at:excludingHosts:)`` read it.
    struct QueueHead {
        let id: DownloadID
        let place: QueuePlace
        let record: DownloadRecord
        /// The journal's count of changed rows when it was read: if no row changed since, `record`
        /// is still the row.
        let changes: Int64
    }

    /// Where a queued download stands: higher priorities first, then lower sequence numbers.
    struct QueuePlace {
        let priority: Int
        let sequence: Int64

        func isAhead(of other: QueuePlace) -> Bool {
            priority != other.priority ? priority > other.priority : sequence < other.sequence
        }
    }

    /// The earliest time after `now` at which a queued download waiting for a retry may run.
    func nextRetryTime(after now: Double) throws(DownloadError) -> Double? {
        acquire()
        defer { lock.unlock() }
        let statement = try prepared(.nextRetry)
        defer { sqlite3_reset(statement) }
        sqlite3_bind_double(statement, 1, now)
        guard sqlite3_step(statement) == SQLITE_ROW else { throw failure("read") }
        return sqlite3_column_type(statement, 0) == SQLITE_NULL ? nil : sqlite3_column_double(statement, 0)
    }

    /// Marks every interrupted download queued again (a manager that resumes unfinished downloads).
    func requeueInterrupted() throws(DownloadError) {
        try locked { () throws(DownloadError) in
            try execute("UPDATE downloads SET state = 'queued' WHERE state = 'interrupted'")
        }
    }

    private static let insertion = """
        INSERT INTO downloads (id, url, destination, total_bytes, etag, last_modified, bytes_committed, state,
                               attempts, last_error, priority, expected_checksum, created_at, updated_at,
                               bytes_synced, queue_seq, host, revalidate, failures, retry_at, expected_size)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)
        """

    /// Every column but the id set from the parameters of ``insertion`` (an update writes the whole row).
    private static let assignments = """
        url = ?2, destination = ?3, total_bytes = ?4, etag = ?5, last_modified = ?6, bytes_committed = ?7,
        state = ?8, attempts = ?9, last_error = ?10, priority = ?11, expected_checksum = ?12, updated_at = ?13,
        bytes_synced = ?14, queue_seq = ?15, host = ?16, revalidate = ?17, failures = ?18, retry_at = ?19,
        expected_size = ?20
        """
    /// Marks the queue's head running, if it still is queued: its row as it is now, or `nil`.
    ///
    /// When no row changed since `head` was read, its record is the row; otherwise the row is read
    /// again. (With `RETURNING`, SQLite first stores the returned rows aside: a claim cost three times
    /// as much, 17 against 6 µs.)
    func claim(_ head: QueueHead) throws(DownloadError) -> DownloadRecord? {
        try writing { () throws(DownloadError) -> DownloadRecord? in
            let unchanged = sqlite3_total_changes64(database) == head.changes
            let statement = try prepared(.claim)
            defer { sqlite3_reset(statement) }
            CHaul_sqlite_bind_text(statement, 1, head.id.rawValue)
            sqlite3_bind_double(statement, 2, Date().timeIntervalSince1970)
            guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("write") }
            guard sqlite3_changes(database) == 1 else { return nil }  // no longer queued
            guard unchanged else { return try storedRecord(for: head.id) }
            var record = head.record
            record.state = .running
            return record
        }
    }

    /// Rewrites a download's row (inserting it if it is gone).
    func update(_ record: DownloadRecord, for id: DownloadID) throws(DownloadError) {
        try writing { () throws(DownloadError) in
            try write(record, for: id, with: try prepared(.updateRow))
            if sqlite3_changes(database) == 0 { try save(record, for: id) }
        }
    }

    /// Inserts or replaces a download's row.
    func save(_ record: DownloadRecord, for id: DownloadID) throws(DownloadError) {
        try writing { () throws(DownloadError) in
            try write(record, for: id, with: try prepared(.upsertRow))
        }
    }

    /// Inserts a download's row unless one with its id exists: whether it did.
    func insertIfAbsent(_ record: DownloadRecord, for id: DownloadID) throws(DownloadError) -> Bool {
        try writing { () throws(DownloadError) -> Bool in
            try write(record, for: id, with: try prepared(.insertRowIfAbsent))
            return sqlite3_changes(database) == 1
        }
    }

    private func write(_ record: DownloadRecord, for id: DownloadID, with statement: OpaquePointer)
        throws(DownloadError)
    {
        defer { sqlite3_reset(statement) }
        CHaul_sqlite_bind_text(statement, 1, id.rawValue)
        CHaul_sqlite_bind_text(statement, 2, record.url)
        CHaul_sqlite_bind_text(statement, 3, record.destination)
        Self.bind(statement, 4, record.totalBytes)
        CHaul_sqlite_bind_text(statement, 5, record.entityTag)
        CHaul_sqlite_bind_text(statement, 6, record.lastModified)
        sqlite3_bind_int64(statement, 7, record.bytesCommitted)
        CHaul_sqlite_bind_text(statement, 8, record.state.rawValue)
        sqlite3_bind_int64(statement, 9, Int64(record.attempts))
        CHaul_sqlite_bind_text(statement, 10, record.lastError)
        sqlite3_bind_int64(statement, 11, Int64(record.priority))
        CHaul_sqlite_bind_text(statement, 12, record.expectedChecksum)
        sqlite3_bind_double(statement, 13, Date().timeIntervalSince1970)
        sqlite3_bind_int64(statement, 14, record.bytesSynced)
        sqlite3_bind_int64(statement, 15, record.queueSequence)
        CHaul_sqlite_bind_text(statement, 16, record.host)
        sqlite3_bind_int64(statement, 17, record.revalidate ? 1 : 0)
        sqlite3_bind_int64(statement, 18, Int64(record.failures))
        sqlite3_bind_double(statement, 19, record.retryAt)
        Self.bind(statement, 20, record.expectedSize)
        guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("write") }
    }

    /// Forgets a download: its row and its partial file.
    func remove(_ id: DownloadID) {
        acquire()
        defer { lock.unlock() }
        try? joinBatch()
        defer { yieldIfContended() }
        if let statement = try? prepared(.delete) {
            CHaul_sqlite_bind_text(statement, 1, id.rawValue)
            _ = sqlite3_step(statement)
            sqlite3_reset(statement)
        }
        unlink(partialPath(for: id))
    }

    // MARK: SQLite helpers

    private func execute(_ sql: String) throws(DownloadError) {
        var message: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(database, sql, nil, nil, &message)
        defer { sqlite3_free(message) }
        guard status == SQLITE_OK else {
            throw error(status: status, detail: message.map { String(cString: $0) } ?? "")
        }
    }

    private func queryText(_ sql: String) throws(DownloadError) -> String? {
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v2(database, sql, -1, &statement, nil)
        guard status == SQLITE_OK else { throw error(status: status, detail: lastMessage) }
        defer { sqlite3_finalize(statement) }
        let step = sqlite3_step(statement)
        guard step == SQLITE_ROW || step == SQLITE_DONE else { throw error(status: step, detail: lastMessage) }
        return step == SQLITE_ROW ? Self.text(statement!, 0) : nil
    }

    /// The statements run for every download, prepared once each and found without hashing their text.
    private enum Query: Int, CaseIterable {
        case recordByID, queueHead, nextRetry, claim, updateRow, upsertRow, insertRowIfAbsent, recordSynced, delete

        var sql: String {
            switch self {
            case .recordByID: "SELECT \(Journal.columns) FROM downloads WHERE id = ?1"
            case .queueHead:
                """
                SELECT \(Journal.columns) FROM downloads WHERE state = 'queued' AND retry_at <= ?1
                ORDER BY priority DESC, queue_seq LIMIT ?2
                """
            case .nextRetry: "SELECT min(retry_at) FROM downloads WHERE state = 'queued' AND retry_at > ?1"
            case .claim: "UPDATE downloads SET state = 'running', updated_at = ?2 WHERE id = ?1 AND state = 'queued'"
            case .updateRow: "UPDATE downloads SET \(Journal.assignments) WHERE id = ?1"
            case .upsertRow: "\(Journal.insertion) ON CONFLICT(id) DO UPDATE SET \(Journal.assignments)"
            case .insertRowIfAbsent: "\(Journal.insertion) ON CONFLICT(id) DO NOTHING"
            case .recordSynced:
                "UPDATE downloads SET bytes_synced = max(bytes_synced, ?2) WHERE id = ?1 AND state != 'completed'"
            case .delete: "DELETE FROM downloads WHERE id = ?1"
            }
        }
    }
    private var queries = [OpaquePointer?](repeating: nil, count: Query.allCases.count)

    private func prepared(_ query: Query) throws(DownloadError) -> OpaquePointer {
        if let statement = queries[query.rawValue] { return statement }
        let statement = try prepared(query.sql)
        queries[query.rawValue] = statement
        return statement
    }

    private func prepared(_ sql: String) throws(DownloadError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        guard database != nil else {
            throw DownloadError(code: .journal, url: nil, path: path, detail: "the journal is closed")
        }
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v2(database, sql, -1, &statement, nil)
        guard status == SQLITE_OK, let statement else { throw error(status: status, detail: lastMessage) }
        statements[sql] = statement
        return statement
    }

    private var lastMessage: String {
        database.map { String(cString: sqlite3_errmsg($0)) } ?? "the journal is closed"
    }

    private func failure(_ what: String) -> DownloadError {
        error(status: sqlite3_errcode(database), detail: "\(what) failed: \(lastMessage)")
    }

    private func error(status: Int32, detail: String) -> DownloadError {
        switch status & 0xff {
        case SQLITE_BUSY, SQLITE_LOCKED:
            return DownloadError(code: .journalLocked, url: nil, path: path, detail: detail)
        case SQLITE_NOTADB, SQLITE_CORRUPT:
            return DownloadError(
                code: .journal,
                url: nil,
                path: path,
                detail: "it is not a Haul journal or it is damaged (\(detail))"
            )
        case SQLITE_FULL:
            return DownloadError(code: .fileSystem, url: nil, errno: ENOSPC, path: path, detail: detail)
        default:
            return DownloadError(code: .journal, url: nil, path: path, detail: detail)
        }
    }

    private static func record(from statement: OpaquePointer) -> DownloadRecord {
        DownloadRecord(
            url: text(statement, 0) ?? "",
            destination: text(statement, 1) ?? "",
            totalBytes: sqlite3_column_type(statement, 2) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, 2),
            entityTag: text(statement, 3),
            lastModified: text(statement, 4),
            bytesCommitted: sqlite3_column_int64(statement, 5),
            bytesSynced: sqlite3_column_int64(statement, 11),
            state: DownloadRecord.State(rawValue: text(statement, 6) ?? "") ?? .interrupted,
            attempts: Int(sqlite3_column_int64(statement, 7)),
            lastError: text(statement, 8),
            priority: Int(sqlite3_column_int64(statement, 9)),
            expectedChecksum: text(statement, 10),
            queueSequence: sqlite3_column_int64(statement, 12),
            host: text(statement, 13) ?? "",
            revalidate: sqlite3_column_int64(statement, 14) != 0,
            failures: Int(sqlite3_column_int64(statement, 16)),
            retryAt: sqlite3_column_double(statement, 17),
            expectedSize: sqlite3_column_type(statement, 18) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, 18)
        )
    }

    private static func text(_ statement: OpaquePointer, _ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(statement, column) else { return nil }
        return String(cString: pointer)
    }

    private static func bind(_ statement: OpaquePointer, _ index: Int32, _ value: Int64?) {
        if let value { sqlite3_bind_int64(statement, index, value) } else { sqlite3_bind_null(statement, index) }
    }
}
