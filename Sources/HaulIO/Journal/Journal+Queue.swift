import CHaul
import FoundationEssentials
import Glibc
import HaulValues

/// The journal as the queue: the next row to admit, retries' times, claims.
extension Journal {
    /// How far past saturated hosts the queue is searched for another host's download.
    static let hostSearchWindow = 256

    /// The queue's head: the queued download with the highest priority, first in within it, that may
    /// run at `now` (seconds since 1970; a retry waits for its time) and whose host is not in
    /// `excludedHosts`; `blocked` says that rows were passed over for their host. (One of
    /// ``nextQueued(at:excludingHosts:limit:)``'s heads.)
    func nextQueued(
        at now: Double,
        excludingHosts excludedHosts: Set<String> = []
    ) throws(DownloadError) -> (head: QueuedRow?, blocked: Bool) {
        let heads = try nextQueued(at: now, excludingHosts: excludedHosts, limit: 1)
        return (heads.first, heads.blocked)
    }

    /// The queue's first `limit` heads in the queue's order, read by one query: a scheduler that
    /// fills many slots in one loop turn claims them one after another (``claim(_:unchangedSince:)``)
    /// instead of reading the queue again for each.
    ///
    /// With hosts excluded, only the first ``hostSearchWindow`` queued rows (more when `limit` is
    /// larger) are searched: a bounded cost per read, whatever the queue's length.
    package func nextQueued(
        at now: Double,
        excludingHosts excludedHosts: Set<String> = [],
        limit: Int
    ) throws(DownloadError) -> QueuedRows {
        let limit = max(1, limit)
        acquire()
        defer { confinement.leave() }
        // On the loop thread after a lost commit, the rows it wrote since are made again first: the
        // queue read is the one the loop left, not an older one (a claimed row read as queued).
        if lostCommit { try? joinBatch() }
        let rowLimit = excludedHosts.isEmpty ? limit : max(limit, Self.hostSearchWindow)
        return try rows().heads(at: now, excludingHosts: excludedHosts, limit: limit, rowLimit: rowLimit)
    }

    /// Queue heads read together (``nextQueued(at:excludingHosts:limit:)``), taken one at a time
    /// from the front.
    package struct QueuedRows {
        private var heads: [QueuedRow] = []
        private var next = 0
        /// The journal's count of changed rows when the heads were read, moved on by each claim made
        /// through ``Journal/claim(_:unchangedSince:)``: while no other row changed, each head's
        /// record is still its row.
        package var changes: Int64
        /// Whether rows were passed over for their host (by the read, or since: ``passOverFirst()``).
        package var blocked = false
        /// Whether the read stopped at its limit: more rows may be queued behind these.
        package var mayHaveMore = false

        init(changes: Int64, capacity: Int = 0) {
            self.changes = changes
            heads.reserveCapacity(capacity)
        }

        mutating func append(_ head: QueuedRow) { heads.append(head) }

        package var count: Int { heads.count - next }
        /// The next head, if any is left.
        package var first: QueuedRow? { next < heads.count ? heads[next] : nil }
        /// The next head's place in the queue, its row not copied (a row's copy retains each of
        /// its strings: an admission pass compares heads across journals before it takes one).
        package var firstPlace: QueuePlace? { next < heads.count ? heads[next].place : nil }
        /// The next head's host, its row not copied.
        package var firstHost: String? { next < heads.count ? heads[next].record.host : nil }

        /// Takes the next head off the front.
        package mutating func removeFirst() -> QueuedRow? {
            guard next < heads.count else { return nil }
            defer { next += 1 }
            return heads[next]
        }

        /// Passes over the next head, whose host reached its limit since the read.
        package mutating func passOverFirst() {
            guard next < heads.count else { return }
            next += 1
            blocked = true
        }
    }

    /// A queue head as ``nextQueued(at:excludingHosts:limit:)`` read it.
    package struct QueuedRow {
        package let id: DownloadID
        package let place: QueuePlace
        package let record: JournalRow
        /// Where the row is in the table (SQLite's `rowid`): the claim and the transfer's writes find
        /// it there, and check its id.
        package let rowID: Int64
        /// The journal's count of changed rows when it was read: if no row changed since, `record`
        /// is still the row.
        let changes: Int64
    }

    /// Where a queued download stands: higher priorities first, then lower sequence numbers.
    package struct QueuePlace {
        let priority: Int
        let sequence: Int64

        package func isAhead(of other: QueuePlace) -> Bool {
            priority != other.priority ? priority > other.priority : sequence < other.sequence
        }
    }

    /// How many rows are queued, and how many of them wait for a retry's time after `now`.
    package func queueCounts(at now: Double) throws(DownloadError) -> (queued: Int, waitingToRetry: Int) {
        try confined { () throws(DownloadError) -> (queued: Int, waitingToRetry: Int) in try rows().queueCounts(at: now)
        }
    }

    /// The earliest time after `now` at which a queued download waiting for a retry may run.
    package func nextRetryTime(after now: Double) throws(DownloadError) -> Double? {
        try confined { () throws(DownloadError) in try rows().nextRetryTime(after: now) }
    }

    /// The rows the queue may admit (queued, or waiting for their retry's time).
    static let admissible = QueueState.sqlCondition(accepting: .admitted, to: .running)

    /// Takes up every interrupted download again (a manager that resumes unfinished downloads): the
    /// row machine's `.continued`, for all rows at once, each now this manager's.
    package func requeueInterrupted() throws(DownloadError) {
        try confined { () throws(DownloadError) in try rows().requeueInterrupted() }
    }
}
