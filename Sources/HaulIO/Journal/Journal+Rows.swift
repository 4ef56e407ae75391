import CHaul
import FoundationEssentials
import Glibc
import HaulValues

/// Reading and writing the row of one download.
extension Journal {
    // MARK: rows

    /// Where the partial file of `id` is: in the state directory; `nil` in a journal in memory,
    /// whose downloads (into streams, memory or nothing) have none.
    package func partialPath(for id: DownloadID) -> String? {
        isInMemory ? nil : Self.partialPath(for: id, in: directory)
    }

    /// Where the partial file of `id` is in the state directory `directory`.
    static func partialPath(for id: DownloadID, in directory: String) -> String { "\(directory)/\(id.rawValue).part" }

    static let columns = """
        url, destination, total_bytes, etag, last_modified, bytes_committed, state, attempts, last_error,
        priority, expected_checksum, bytes_synced, queue_seq, host, revalidate, id, failures, retry_at,
        expected_size, last_modified_strong, placed_mtime, user_agent, header_names, folder, mirrors, rate_limit,
        connections, segments, keeps_existing, placing, rowid
        """
    /// The index of `rowid` in ``columns``: where the row is in the table, found without the id's index.
    static let rowIDColumn: Int32 = 30

    /// The stored record, or `nil` when there is none.
    package func record(for id: DownloadID) throws(DownloadError) -> JournalRow? {
        acquire()
        defer { confinement.leave() }
        return try storedRecord(for: id)
    }

    /// The stored record, or `nil`. Call inside the journal (``Journal/confined(_:)``).
    package func storedRecord(for id: DownloadID) throws(DownloadError) -> JournalRow? {
        try rows().record(for: id)
    }

    /// Every stored download, oldest first.
    package func allRecords() throws(DownloadError) -> [(DownloadID, JournalRow)] {
        try confined { () throws(DownloadError) in try rows().records(unfinishedOnly: false) }
    }

    /// The downloads that still have work to do, oldest first.
    package func unfinishedRecords() throws(DownloadError) -> [(DownloadID, JournalRow)] {
        try confined { () throws(DownloadError) in try rows().records(unfinishedOnly: true) }
    }

    /// The rows of downloads that still have work to do.
    static let unfinished = QueueState.sqlCondition(QueueState.allCases.filter(\.isUnfinished))

    /// Whether a download recorded here still has work to do (or a retry to wait for).
    package func hasUnfinishedRows() throws(DownloadError) -> Bool {
        try confined { () throws(DownloadError) in try rows().hasUnfinishedRows() }
    }

    /// The rows of a journal in a file for which `condition` (SQL) is true, oldest first.
    func records(where condition: String) throws(DownloadError) -> [(DownloadID, JournalRow)] {
        acquire()
        defer { confinement.leave() }
        let statement = try prepared("SELECT \(Self.columns) FROM downloads WHERE \(condition) ORDER BY created_at, id")
        defer { sqlite3_reset(statement) }
        var rows: [(DownloadID, JournalRow)] = []
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

    /// Records, before a finished file is moved into place, which file that is (``PlacedFile/identity``):
    /// a process killed after the move and before the row says completed leaves a row that finds
    /// its file by it (``JournalRow/placing``), instead of fetching it again. Commits at once
    /// (called on a disk lane); cleared when the row is written completed.
    func recordPlacing(_ id: DownloadID, identity: String) throws(DownloadError) {
        try recordPlacings([(id, identity)])
    }

    /// ``recordPlacing(_:identity:)`` for several downloads, in one transaction. With a loop that
    /// batches this journal's writes (``WriteBatch/placings``), the loop writes them in its turn's
    /// transaction and the lane waits for its commit (each lane's own transaction, cutting the loop's
    /// turn-long one short, was 10-15 % slower on ext4); else in a transaction of their own.
    func recordPlacings(_ rows: [(DownloadID, String)]) throws(DownloadError) {
        guard !isInMemory, !rows.isEmpty else { return }
        if let batch, !batch.isBatchingThread, let handOff = batch.placings {
            try handOff(self, rows)
            return
        }
        try transaction { () throws(DownloadError) in try writePlacings(rows) }
    }

    /// On the loop: writes `rows`' placings in the turn's transaction; `answer` is told once it
    /// commits (the files may then be placed), or why they were not written.
    package func recordPlacingsInTurn(
        _ rows: [(DownloadID, String)],
        answer: @escaping @Sendable (DownloadError?) -> Void
    ) {
        do throws(DownloadError) {
            try writing { () throws(DownloadError) in
                guard !isClosed else { throw closedError }
                try writePlacings(rows)
                // Told by the commit; without a batch, each statement committed on its own.
                if batchOpen { commitWaiters.append(answer) } else { answer(nil) }
            }
        } catch {
            answer(error)
        }
    }

    private func writePlacings(_ rows: [(DownloadID, String)]) throws(DownloadError) {
        let statement = try prepared(.recordPlacing)
        for (id, identity) in rows {
            defer { sqlite3_reset(statement) }
            Self.bind(statement, 1, id.rawValue)
            Self.bind(statement, 2, identity)
            guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("write") }
        }
    }

    /// Raises the bytes known durable in `id`'s row to `bytes` (not once it is completed).
    package func recordSynced(_ id: DownloadID, bytes: Int64) throws(DownloadError) {
        try writing { () throws(DownloadError) in
            remember(id, .synced(bytes))
            try rows().recordSynced(id, bytes: bytes)
        }
    }

    static let insertion = """
        INSERT INTO downloads (id, url, destination, total_bytes, etag, last_modified, bytes_committed, state,
                               attempts, last_error, priority, expected_checksum, created_at, updated_at,
                               bytes_synced, queue_seq, host, revalidate, failures, retry_at, expected_size,
                               last_modified_strong, placed_mtime, user_agent, header_names, folder, mirrors,
                               rate_limit, connections, segments, keeps_existing, owner)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,
                ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31)
        """

    /// Every column but the id set from the parameters of ``insertion`` (an update writes the whole row).
    static let assignments = """
        url = ?2, destination = ?3, total_bytes = ?4, etag = ?5, last_modified = ?6, bytes_committed = ?7,
        state = ?8, attempts = ?9, last_error = ?10, priority = ?11, expected_checksum = ?12, updated_at = ?13,
        bytes_synced = ?14, queue_seq = ?15, host = ?16, revalidate = ?17, failures = ?18, retry_at = ?19,
        expected_size = ?20, last_modified_strong = ?21, placed_mtime = ?22, user_agent = ?23,
        header_names = ?24, folder = ?25, mirrors = ?26, rate_limit = ?27, connections = ?28,
        segments = ?29, keeps_existing = ?30, owner = ?31,
        placing = CASE WHEN ?8 = '\(QueueState.completed.column)' THEN NULL ELSE placing END
        """
    /// Marks the queue's head running, if it still is queued: its row as it is now, or `nil`.
    func claim(_ head: QueuedRow) throws(DownloadError) -> JournalRow? {
        var changes = head.changes
        return try claim(head, unchangedSince: &changes)
    }

    /// ``claim(_:)`` for one of several heads read together: `changes` is the journal's count of
    /// changed rows at the read (``QueuedRows/changes``), and moves on by this claim when nothing
    /// else changed a row meanwhile, so that the next head's record is trusted too.
    package func claim(_ head: QueuedRow, unchangedSince changes: inout Int64) throws(DownloadError) -> JournalRow? {
        try writing { () throws(DownloadError) -> JournalRow? in
            let claimed = try rows().claim(head, unchangedSince: &changes)
            if let claimed { remember(head.id, .row(claimed)) }
            return claimed
        }
    }

    /// Rewrites a download's row (inserting it if it is gone). `rowID`, where the row was when it
    /// was claimed (``QueuedRow/rowID``), finds it without a search.
    package func update(_ record: JournalRow, for id: DownloadID, at rowID: Int64? = nil) throws(DownloadError) {
        try writing { () throws(DownloadError) in
            remember(id, .row(record))
            try rows().update(record, for: id, at: rowID)
        }
    }

    /// Inserts or replaces a download's row.
    package func save(_ record: JournalRow, for id: DownloadID) throws(DownloadError) {
        try writing { () throws(DownloadError) in
            remember(id, .row(record))
            try rows().save(record, for: id)
        }
    }

    /// Inserts a download's row unless one with its id exists: whether it did.
    package func insertIfAbsent(_ record: JournalRow, for id: DownloadID) throws(DownloadError) -> Bool {
        try writing { () throws(DownloadError) -> Bool in try rows().insertIfAbsent(record, for: id) }
    }

    /// Whether a row in `state` has an owner: queued, waiting to retry or running, the states its
    /// owner's going away interrupts (``ownedRows`` in SQL, from the same transition).
    package static func owned(_ state: QueueState) -> Bool {
        state.after(.interrupted) == .moves(to: .interrupted)
    }

    /// Whether `path` is, or is to be, another download's file in this journal: a name chosen by a
    /// download into a folder, or the destination of a download to that file.
    package func destinationIsTaken(_ path: String, except id: DownloadID) throws(DownloadError) -> Bool {
        try confined { () throws(DownloadError) in try rows().destinationIsTaken(path, except: id) }
    }

    /// Records that a download was cancelled: its row, `record` (its state `.cancelled`, nothing
    /// fetched kept), stays for listings, and its partial file goes. A row in memory (a stream's, a
    /// body's) goes altogether: nothing of it is left to find.
    package func recordCancelled(_ record: JournalRow, for id: DownloadID) throws(DownloadError) {
        if isInMemory {
            remove(id)
            return
        }
        try save(record, for: id)
        unlink(Self.partialPath(for: id, in: directory))
    }

    /// Forgets a download: its row and its partial file (a journal in memory has none).
    package func remove(_ id: DownloadID) {
        acquire()
        defer { confinement.leave() }
        try? joinBatch()
        remember(id, .removed)
        do {
            try rows().remove(id)
        } catch {
            // (Closed: nothing left to remove.)
            if batchOpen { lostCommit = true }
            noteIfBatchRolledBack(error)
        }
        if let path = partialPath(for: id) { unlink(path) }
    }
}
