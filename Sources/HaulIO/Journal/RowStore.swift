import HaulValues

/// Where a ``Journal`` keeps its rows: SQLite in the state directory (``SQLiteRows``), or this
/// process's memory for the rows of downloads nobody else can continue, into streams, memory or
/// nothing (``MemoryRows``). The same rows with the same meanings either way: a row waiting to retry
/// is one whose `retryAt` is set; a queued or running row is this journal's owner's; the queue's order
/// is highest priority first, then first in. The journal calls each method holding its lock, inside
/// its turn's transaction when it has one.
protocol RowStore: AnyObject {
    /// Rows inserted, updated or removed so far (SQLite's `total_changes`): a queue head read when it
    /// was `n` is still its row while it is `n` (``claim(_:unchangedSince:)``).
    var changes: Int64 { get }

    /// The row of `id`, or `nil` when there is none.
    func record(for id: DownloadID) throws(DownloadError) -> JournalRow?
    /// Every row, or only those with work to do (``JournalRow/isUnfinished``), oldest first.
    func records(unfinishedOnly: Bool) throws(DownloadError) -> [(DownloadID, JournalRow)]
    /// Whether any row has work to do.
    func hasUnfinishedRows() throws(DownloadError) -> Bool
    /// Where `id`'s row stands, read without the rest of it.
    func standing(of id: DownloadID) throws(DownloadError) -> Journal.RowStanding?
    /// Whether `path` is another download's destination, or a name one chose in a folder.
    func destinationIsTaken(_ path: String, except id: DownloadID) throws(DownloadError) -> Bool

    /// The queue's first `limit` heads that may run at `now`, among its first `rowLimit` rows, passing
    /// over those of `excludedHosts` (``Journal/nextQueued(at:excludingHosts:limit:)``).
    func heads(
        at now: Double,
        excludingHosts excludedHosts: Set<String>,
        limit: Int,
        rowLimit: Int
    ) throws(DownloadError) -> Journal.QueuedRows
    /// Marks `head` running if it is still queued: its row as it is now, or `nil`
    /// (``Journal/claim(_:unchangedSince:)``).
    func claim(_ head: Journal.QueuedRow, unchangedSince changes: inout Int64) throws(DownloadError) -> JournalRow?
    /// How many rows are queued, and how many of them wait for a retry's time after `now`.
    func queueCounts(at now: Double) throws(DownloadError) -> (queued: Int, waitingToRetry: Int)
    /// The earliest retry time after `now` of a queued row.
    func nextRetryTime(after now: Double) throws(DownloadError) -> Double?
    /// Queues every interrupted row again, as this journal's owner's.
    func requeueInterrupted() throws(DownloadError)

    /// Rewrites `id`'s row (inserting it when it is gone); `rowID` is where it was claimed.
    func update(_ record: JournalRow, for id: DownloadID, at rowID: Int64?) throws(DownloadError)
    /// Inserts or replaces `id`'s row.
    func save(_ record: JournalRow, for id: DownloadID) throws(DownloadError)
    /// Inserts `id`'s row unless there is one: whether it did.
    func insertIfAbsent(_ record: JournalRow, for id: DownloadID) throws(DownloadError) -> Bool
    /// Raises the bytes known durable of `id`'s row (not once it is completed).
    func recordSynced(_ id: DownloadID, bytes: Int64) throws(DownloadError)
    /// Removes `id`'s row, if there is one.
    func remove(_ id: DownloadID) throws(DownloadError)
}
