import CHaul
import Glibc
import HaulValues

/// The rows' owners: which manager queued or runs each row, and taking back the rows of one that
/// is gone (see ``JournalOwnership``).
extension Journal {
    /// The condition of the rows an owner holds: queued, waiting to retry or running.
    static let ownedRows = QueueState.sqlCondition(accepting: .interrupted, to: .interrupted)

    /// Where a row stands, read without the rest of it: its state, owner and bytes.
    package struct RowStanding {
        package let state: QueueState
        package let owner: Int64?
        package let bytesCommitted: Int64
        package let totalBytes: Int64?
    }

    /// Where `id`'s row stands (`nil`: there is none). Call inside the journal (``Journal/confined(_:)``).
    package func standing(of id: DownloadID) throws(DownloadError) -> RowStanding? {
        try rows().standing(of: id)
    }

    /// SQLite's `data_version`: it moves on when another connection (another manager, another
    /// process) commits; this one's own commits leave it. Call inside the journal (``Journal/confined(_:)``).
    package func dataVersion() -> Int64? {
        guard let statement = try? prepared("PRAGMA data_version") else { return nil }
        defer { sqlite3_reset(statement) }
        return sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : nil
    }

    /// The integer in `column`, or `nil` when it is NULL.
    static func integer(_ statement: OpaquePointer, _ column: Int32) -> Int64? {
        sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, column)
    }

    /// Whether `id`'s row is queued or running for another manager that still runs. Call holding
    /// `lock`.
    package func isOwnedByAnother(_ id: DownloadID) -> Bool {
        guard let standing = try? standing(of: id), Self.owned(standing.state) else { return false }
        return isAnotherLiveOwner(standing.owner)
    }

    /// Whether `token`, a row's owner, is another manager that still runs (this journal's own
    /// token is not another's).
    package func isAnotherLiveOwner(_ token: Int64?) -> Bool {
        guard let token, token != owner else { return false }
        return JournalOwnership.isAlive(token, in: directory)
    }

    /// Marks interrupted every row held by a manager that is gone (its lock released: it stopped,
    /// crashed or was killed) or by none (written by an older Haul): the row machine's
    /// `.interrupted`; asking for one again continues it from its bytes. Returns how many. Call in
    /// a transaction (``transaction(_:)``), so that the owners looked at are those of the rows changed.
    @discardableResult
    func releaseRowsOfGoneOwners() throws(DownloadError) -> Int {
        let statement = try prepared("SELECT DISTINCT owner FROM downloads WHERE \(Self.ownedRows)")
        var owners: [Int64?] = []
        stepping: while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW: owners.append(Self.integer(statement, 0))
            case SQLITE_DONE: break stepping
            default:
                sqlite3_reset(statement)
                throw failure("read")
            }
        }
        sqlite3_reset(statement)
        var released = 0
        for token in owners where token != owner && !isAnotherLiveOwner(token) {
            released += try release(ownedBy: token)
        }
        JournalOwnership.removeGoneOwners(in: directory)
        return released
    }

    /// Marks interrupted the rows of the gone owner `token` (`nil`: rows of no owner).
    private func release(ownedBy token: Int64?) throws(DownloadError) -> Int {
        let statement = try prepared(
            """
            UPDATE downloads SET state = '\(QueueState.interrupted.column)', owner = NULL
            WHERE \(Self.ownedRows) AND owner IS ?1
            """
        )
        defer { sqlite3_reset(statement) }
        Self.bind(statement, 1, token)
        guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("write") }
        return Int(sqlite3_changes(database))
    }
}
