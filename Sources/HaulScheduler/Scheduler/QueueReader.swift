import HaulIO
import HaulValues
import Logging

/// One admission pass's reading of the journals' queues: the best head across every journal with
/// queued rows, the highest priority first, then the oldest. Each journal's queue is read once for
/// as many heads as slots are free, and again only when those are taken and more may be queued. (In
/// 10,000 small downloads at 100 at once, a turn fills about 40 slots: read for each, the queue took
/// a quarter of the journal's time on the loop.) Told the pool machine at each step, it tells it
/// what it found (a queue drained, a retry to wake for); the retry timer's new delay is left for the
/// scheduler to arm (``retryTimerDelay``).
struct QueueReader {
    let catalog: Catalog
    let clock: LoopClock
    let logger: Logger
    /// The heads read in this pass, by state directory.
    private var read: [String: QueueRead] = [:]
    /// When the retry timer is to fire, in seconds from now, if a read set up a retry to wake for.
    private(set) var retryTimerDelay: Double?

    init(catalog: Catalog, clock: LoopClock, logger: Logger) {
        self.catalog = catalog
        self.clock = clock
        self.logger = logger
    }

    /// A journal's queue heads read in this pass. (A class: mutated through a dictionary's
    /// subscript, the heads cost two allocations per admission, the accessor's.)
    final class QueueRead {
        var heads: Journal.QueuedRows
        init(_ heads: Journal.QueuedRows) { self.heads = heads }
    }

    /// The best head across the queued directories, taken off the front of its directory's heads
    /// (`read`, whose `changes` the claim moves on). Heads are compared by their places; only the one
    /// taken is copied out.
    mutating func next<Member>(
        _ pool: inout PoolMachine<Member>
    ) -> (journal: Journal, head: Journal.QueuedRow, read: QueueRead)? {
        var best: (journal: Journal, place: Journal.QueuePlace, read: QueueRead)?
        let saturatedHosts = pool.admission.saturatedHosts
        for directory in pool.admission.queuedDirectories {
            guard let journal = catalog.openLoopJournal(for: directory) else {
                pool.queueDrained(in: directory)
                read[directory] = nil
                continue
            }
            var pending = read[directory]
            // Heads whose host reached its limit since the read wait, as the read would have left them.
            while let pending, let host = pending.heads.firstHost, saturatedHosts.contains(host) {
                pending.heads.passOverFirst()
            }
            if pending.map({ $0.heads.count == 0 && $0.heads.mayHaveMore }) ?? true {
                let blockedBefore = pending?.heads.blocked ?? false
                pending = readQueue(of: journal, in: directory, &pool).map(QueueRead.init)
                if blockedBefore { pending?.heads.blocked = true }
                read[directory] = pending
            }
            guard let pending, let place = pending.heads.firstPlace else {
                pool.queueDrained(in: directory, blockedByHosts: pending?.heads.blocked ?? false)
                read[directory] = nil
                if pool.mayCloseJournal(directory) { catalog.closeIfIdle(directory) }
                continue
            }
            if let current = best, !place.isAhead(of: current.place) { continue }
            best = (journal, place, pending)
        }
        guard let best, let head = best.read.heads.removeFirst() else { return nil }
        return (best.journal, head, best.read)
    }

    /// Up to as many of `journal`'s queue heads as slots are free; none when it cannot be read. When
    /// none may run now, or the last retry time known for the queue came (the journal may hold
    /// rows waiting that this manager did not set up), the journal's next retry time wakes it again.
    private mutating func readQueue<Member>(
        of journal: Journal,
        in directory: String,
        _ pool: inout PoolMachine<Member>
    ) -> Journal.QueuedRows? {
        let now = clock.wallSeconds
        do {
            let heads = try journal.nextQueued(
                at: now,
                excludingHosts: pool.admission.saturatedHosts,
                limit: pool.admission.freeSlots
            )
            let wokenForRetry = pool.takeWokenForRetry(directory)
            if heads.count == 0 || wokenForRetry, let retryAt = try journal.nextRetryTime(after: now) {
                retryTimerDelay = pool.wakeForRetry(in: directory, at: retryAt, now: now)
            }
            return heads
        } catch {
            logger.error(
                "could not read the queue",
                metadata: ["haul.journal": "\(journal.path)", "haul.error": "\(error)"]
            )
            return nil
        }
    }
}
