import CHaul
import FoundationEssentials
import Glibc

/// The journal as the queue: the next row to admit, retries' times, claims.
extension Journal {
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
                    rowID: sqlite3_column_int64(statement, Self.rowIDColumn),
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
        /// Where the row is in the table (SQLite's `rowid`): the claim and the transfer's writes find
        /// it there, and check its id.
        let rowID: Int64
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

    /// How many rows are queued, and how many of them wait for a retry's time after `now`.
    func queueCounts(at now: Double) throws(DownloadError) -> (queued: Int, waitingToRetry: Int) {
        try locked { () throws(DownloadError) -> (queued: Int, waitingToRetry: Int) in
            let statement = try prepared(.queueCounts)
            defer { sqlite3_reset(statement) }
            sqlite3_bind_double(statement, 1, now)
            guard sqlite3_step(statement) == SQLITE_ROW else { throw failure("read") }
            return (Int(sqlite3_column_int64(statement, 0)), Int(sqlite3_column_int64(statement, 1)))
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

    /// The rows the queue may admit (queued, or waiting for their retry's time).
    static let admissible = QueueState.sqlCondition(accepting: .admitted, to: .running)

    /// Takes up every interrupted download again (a manager that resumes unfinished downloads): the
    /// row machine's `.continued`, for all rows at once.
    func requeueInterrupted() throws(DownloadError) {
        try locked { () throws(DownloadError) in
            try execute(
                """
                UPDATE downloads SET state = '\(QueueState.queued.column)'
                WHERE \(QueueState.sqlCondition(accepting: .continued, to: .queued))
                """
            )
        }
    }
}
