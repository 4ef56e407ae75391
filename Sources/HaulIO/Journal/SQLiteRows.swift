import CHaul
import FoundationEssentials
import Glibc
import HaulValues

/// The journal's row operations in SQL, on its database (the `downloads` table; the journal opens,
/// migrates and closes the connection, and holds its transactions). Its statements are prepared once
/// (``Journal/Query``).
final class SQLiteRows {
    /// The journal whose connection this uses; it holds this store and outlives it.
    unowned let journal: Journal

    init(journal: Journal) {
        self.journal = journal
    }
}

extension SQLiteRows: RowStore {
    var changes: Int64 { sqlite3_total_changes64(journal.database) }

    func record(for id: DownloadID) throws(DownloadError) -> JournalRow? {
        let statement = try journal.prepared(.recordByID)
        defer { sqlite3_reset(statement) }
        Journal.bind(statement, 1, id.rawValue)
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return Journal.record(from: statement)
        case SQLITE_DONE: return nil
        default: throw journal.failure("read")
        }
    }

    func records(unfinishedOnly: Bool) throws(DownloadError) -> [(DownloadID, JournalRow)] {
        try journal.records(where: unfinishedOnly ? Journal.unfinished : "1")
    }

    func hasUnfinishedRows() throws(DownloadError) -> Bool {
        let statement = try journal.prepared("SELECT 1 FROM downloads WHERE \(Journal.unfinished) LIMIT 1")
        defer { sqlite3_reset(statement) }
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw journal.failure("read")
        }
    }

    func standing(of id: DownloadID) throws(DownloadError) -> Journal.RowStanding? {
        let statement = try journal.prepared(
            "SELECT state, retry_at, owner, bytes_committed, total_bytes FROM downloads WHERE id = ?1"
        )
        defer { sqlite3_reset(statement) }
        Journal.bind(statement, 1, id.rawValue)
        switch sqlite3_step(statement) {
        case SQLITE_ROW:
            return Journal.RowStanding(
                state: QueueState(
                    column: Journal.text(statement, 0) ?? "",
                    retryAt: sqlite3_column_double(statement, 1)
                ),
                owner: Journal.integer(statement, 2),
                bytesCommitted: sqlite3_column_int64(statement, 3),
                totalBytes: Journal.integer(statement, 4)
            )
        case SQLITE_DONE: return nil
        default: throw journal.failure("read")
        }
    }

    func destinationIsTaken(_ path: String, except id: DownloadID) throws(DownloadError) -> Bool {
        let statement = try journal.prepared(
            "SELECT 1 FROM downloads WHERE folder IS NOT NULL AND destination = ?1 AND id != ?2 LIMIT 1"
        )
        defer { sqlite3_reset(statement) }
        Journal.bind(statement, 1, path)
        Journal.bind(statement, 2, id.rawValue)
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return try record(for: DownloadID(destinationPath: path)) != nil
        default: throw journal.failure("read")
        }
    }

    func heads(
        at now: Double,
        excludingHosts excludedHosts: Set<String>,
        limit: Int,
        rowLimit: Int
    ) throws(DownloadError) -> Journal.QueuedRows {
        let statement = try journal.prepared(.queueHead)
        defer { sqlite3_reset(statement) }
        sqlite3_bind_double(statement, 1, now)
        sqlite3_bind_int64(statement, 2, Int64(rowLimit))
        Journal.bind(statement, 3, journal.owner)
        var heads = Journal.QueuedRows(changes: changes, capacity: limit)
        var rows = 0
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW:
                rows += 1
                if !excludedHosts.isEmpty, excludedHosts.contains(Journal.text(statement, 13) ?? "") {
                    heads.blocked = true
                    continue
                }
                let record = Journal.record(from: statement)
                heads.append(
                    Journal.QueuedRow(
                        id: DownloadID(rawValue: Journal.text(statement, 15) ?? ""),
                        place: Journal.QueuePlace(priority: record.priority, sequence: record.queueSequence),
                        record: record,
                        rowID: sqlite3_column_int64(statement, Journal.rowIDColumn),
                        changes: heads.changes
                    )
                )
                guard heads.count < limit else {
                    heads.mayHaveMore = true
                    return heads
                }
            case SQLITE_DONE:
                // Rows past a window full of excluded hosts' are read again once these are claimed.
                heads.mayHaveMore = rows == rowLimit
                return heads
            default:
                throw journal.failure("read")
            }
        }
    }

    /// When no row changed since `head` was read, its record is the row; otherwise the row is read
    /// again. (Not with `RETURNING`, whose rows SQLite first stores aside: a claim cost three times
    /// as much, `Benchmarks/CHOICES.md`.)
    func claim(_ head: Journal.QueuedRow, unchangedSince changes: inout Int64) throws(DownloadError)
        -> JournalRow?
    {
        let unchanged = self.changes == changes
        let statement = try journal.prepared(.claim)
        defer { sqlite3_reset(statement) }
        Journal.bind(statement, 1, head.id.rawValue)
        sqlite3_bind_double(statement, 2, Date().timeIntervalSince1970)
        sqlite3_bind_int64(statement, 3, head.rowID)
        Journal.bind(statement, 4, journal.owner)
        guard sqlite3_step(statement) == SQLITE_DONE else { throw journal.failure("write") }
        guard sqlite3_changes(journal.database) == 1 else { return nil }  // no longer queued
        guard unchanged else { return try record(for: head.id) }
        changes = self.changes
        var record = head.record
        record.apply(.admitted)
        return record
    }

    func queueCounts(at now: Double) throws(DownloadError) -> (queued: Int, waitingToRetry: Int) {
        let statement = try journal.prepared(.queueCounts)
        defer { sqlite3_reset(statement) }
        sqlite3_bind_double(statement, 1, now)
        Journal.bind(statement, 2, journal.owner)
        guard sqlite3_step(statement) == SQLITE_ROW else { throw journal.failure("read") }
        return (Int(sqlite3_column_int64(statement, 0)), Int(sqlite3_column_int64(statement, 1)))
    }

    func nextRetryTime(after now: Double) throws(DownloadError) -> Double? {
        let statement = try journal.prepared(.nextRetry)
        defer { sqlite3_reset(statement) }
        sqlite3_bind_double(statement, 1, now)
        Journal.bind(statement, 2, journal.owner)
        guard sqlite3_step(statement) == SQLITE_ROW else { throw journal.failure("read") }
        return sqlite3_column_type(statement, 0) == SQLITE_NULL ? nil : sqlite3_column_double(statement, 0)
    }

    func requeueInterrupted() throws(DownloadError) {
        let statement = try journal.prepared(
            """
            UPDATE downloads SET state = '\(QueueState.queued.column)', owner = ?1
            WHERE \(QueueState.sqlCondition(accepting: .continued, to: .queued))
            """
        )
        defer { sqlite3_reset(statement) }
        Journal.bind(statement, 1, journal.owner)
        guard sqlite3_step(statement) == SQLITE_DONE else { throw journal.failure("write") }
    }

    /// `rowID` finds the row without a search of the ids' index (a fifth of a completion's write); a
    /// row that moved since (removed, then queued again) is found by its id. The whole row is
    /// written: a completion setting only the nine columns it changes was no cheaper (SQLite rewrites
    /// the record either way; the binds are a small part): 5.0 % of the loop thread in (a) against
    /// 4.7 %, one profile of each build.
    func update(_ record: JournalRow, for id: DownloadID, at rowID: Int64?) throws(DownloadError) {
        if let rowID {
            let statement = try journal.prepared(.updateRowAt)
            sqlite3_bind_int64(statement, 32, rowID)
            try write(record, for: id, with: statement)
            if sqlite3_changes(journal.database) == 1 { return }
        }
        try write(record, for: id, with: try journal.prepared(.updateRow))
        if sqlite3_changes(journal.database) == 0 { try save(record, for: id) }
    }

    func save(_ record: JournalRow, for id: DownloadID) throws(DownloadError) {
        try write(record, for: id, with: try journal.prepared(.upsertRow))
    }

    func insertIfAbsent(_ record: JournalRow, for id: DownloadID) throws(DownloadError) -> Bool {
        try write(record, for: id, with: try journal.prepared(.insertRowIfAbsent))
        return sqlite3_changes(journal.database) == 1
    }

    func recordSynced(_ id: DownloadID, bytes: Int64) throws(DownloadError) {
        let statement = try journal.prepared(.recordSynced)
        defer { sqlite3_reset(statement) }
        Journal.bind(statement, 1, id.rawValue)
        sqlite3_bind_int64(statement, 2, bytes)
        guard sqlite3_step(statement) == SQLITE_DONE else { throw journal.failure("write") }
    }

    func remove(_ id: DownloadID) throws(DownloadError) {
        let statement = try journal.prepared(.delete)
        defer { sqlite3_reset(statement) }
        Journal.bind(statement, 1, id.rawValue)
        guard sqlite3_step(statement) == SQLITE_DONE else { throw journal.failure("write") }
    }

    /// Binds `record` as `id`'s row to `statement` (one of the statements built on
    /// ``Journal/insertion`` and ``Journal/assignments``) and runs it.
    private func write(_ record: JournalRow, for id: DownloadID, with statement: OpaquePointer)
        throws(DownloadError)
    {
        defer { sqlite3_reset(statement) }
        Journal.bind(statement, 1, id.rawValue)
        Journal.bind(statement, 2, record.url)
        Journal.bind(statement, 3, record.destination)
        Journal.bind(statement, 4, record.totalBytes)
        Journal.bind(statement, 5, record.entityTag)
        Journal.bind(statement, 6, record.lastModified)
        sqlite3_bind_int64(statement, 7, record.bytesCommitted)
        Journal.bind(statement, 8, record.state.column)
        sqlite3_bind_int64(statement, 9, Int64(record.attempts))
        Journal.bind(statement, 10, record.lastError)
        sqlite3_bind_int64(statement, 11, Int64(record.priority))
        Journal.bind(statement, 12, record.expectedChecksum)
        sqlite3_bind_double(statement, 13, Date().timeIntervalSince1970)
        sqlite3_bind_int64(statement, 14, record.bytesSynced)
        sqlite3_bind_int64(statement, 15, record.queueSequence)
        Journal.bind(statement, 16, record.host)
        sqlite3_bind_int64(statement, 17, record.revalidate ? 1 : 0)
        sqlite3_bind_int64(statement, 18, Int64(record.failures))
        sqlite3_bind_double(statement, 19, record.retryAt)
        Journal.bind(statement, 20, record.expectedSize)
        sqlite3_bind_int64(statement, 21, record.lastModifiedIsStrong ? 1 : 0)
        if let time = record.placedModificationTime {
            sqlite3_bind_double(statement, 22, time)
        } else {
            sqlite3_bind_null(statement, 22)
        }
        Journal.bind(statement, 23, record.userAgent)
        Journal.bind(
            statement,
            24,
            record.headerNames.isEmpty ? nil : record.headerNames.joined(separator: "\n")
        )
        Journal.bind(statement, 25, record.folder)
        Journal.bind(statement, 26, record.mirrors.isEmpty ? nil : record.mirrors.joined(separator: "\n"))
        Journal.bind(statement, 27, record.maxBytesPerSecond)
        Journal.bind(statement, 28, record.connections.map(Int64.init))
        Journal.bind(statement, 29, record.segments)
        sqlite3_bind_int64(statement, 30, record.keepsExistingFile ? 1 : 0)
        // Queued, waiting or running: this manager's (the only writer of those rows but the take-back
        // of a gone owner's); else nobody's.
        Journal.bind(statement, 31, Journal.owned(record.state) ? journal.owner : nil)
        guard sqlite3_step(statement) == SQLITE_DONE else { throw journal.failure("write") }
    }
}
