import CHaul
import Dispatch
import FoundationEssentials
import Glibc
import HaulIO
import HaulTransfer
import Logging
import Tracing

/// Admission: the best queue heads across journals take the slots that are free, each a `Transfer`.
extension Scheduler {
    // MARK: admission

    /// Asks for ``admitWaiting()`` at the end of this loop turn, once every callback of the turn has
    /// run. Admitted inside the callback that freed a slot, each new request left alone while the
    /// others were still being read, and curl sent it within the next socket's action: a local
    /// server went idle and was woken for almost every request. Admitted together, the turn's
    /// requests go out together at the start of the next turn.
    func admitAtTurnEnd() { pool.admitAtTurnEnd() }

    /// Admits queued downloads while slots are free: the highest priority first, then the oldest,
    /// across every journal with queued rows. Each journal's queue is read once for as many heads as
    /// slots are free (`read`, by state directory), and again only when those are taken and more may
    /// be queued. (In 10,000 small downloads at 100 at once, a turn fills about 40 slots: read for
    /// each, the queue took a quarter of the journal's time on the loop.)
    func admitWaiting() {
        var read: [String: QueueRead] = [:]
        while !pool.isShuttingDown, pool.admission.hasFreeSlot {
            guard let (journal, head, pending) = nextQueued(&read) else { break }
            admit(head, from: journal, unchangedSince: &pending.heads.changes)
        }
    }

    /// A journal's queue heads read in this admission pass. (A class: mutated through a dictionary's
    /// subscript, the heads cost two allocations per admission, the accessor's.)
    private final class QueueRead {
        var heads: Journal.QueuedRows
        init(_ heads: Journal.QueuedRows) { self.heads = heads }
    }

    /// The best head across the queued directories, taken off the front of its directory's `read`.
    /// Heads are compared by their places; only the one taken is copied out.
    private func nextQueued(_ read: inout [String: QueueRead]) -> (Journal, Journal.QueuedRow, QueueRead)? {
        var best: (journal: Journal, place: Journal.QueuePlace, read: QueueRead)?
        let saturatedHosts = pool.admission.saturatedHosts
        for directory in pool.admission.queuedDirectories {
            guard let journal = catalog.openJournal(for: directory) else {
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
                pending = readQueue(of: journal, in: directory).map(QueueRead.init)
                if blockedBefore { pending?.heads.blocked = true }
                read[directory] = pending
            }
            guard let pending, let place = pending.heads.firstPlace else {
                pool.queueDrained(in: directory, blockedByHosts: pending?.heads.blocked ?? false)
                read[directory] = nil
                closeJournalIfIdle(directory)
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
    private func readQueue(of journal: Journal, in directory: String) -> Journal.QueuedRows? {
        let now = reactor.clock.wallSeconds
        do {
            let heads = try journal.nextQueued(
                at: now,
                excludingHosts: pool.admission.saturatedHosts,
                limit: pool.admission.freeSlots
            )
            let wokenForRetry = pool.takeWokenForRetry(directory)
            if heads.count == 0 || wokenForRetry, let retryAt = try journal.nextRetryTime(after: now) {
                wakeForRetry(in: directory, at: retryAt)
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

    /// Takes a queued row (marking it running) and starts its transfer.
    /// `changes` is the journal's count of changed rows when `head` was read, moved on by the claim
    /// (``Journal/claim(_:unchangedSince:)``).
    private func admit(_ head: Journal.QueuedRow, from journal: Journal, unchangedSince changes: inout Int64) {
        let id = head.id
        let record: JournalRow
        do {
            guard let claimed = try journal.claim(head, unchangedSince: &changes) else { return }  // no longer queued
            record = claimed
        } catch {
            logger.error(
                "could not write the journal",
                metadata: ["haul.journal": "\(journal.path)", "haul.error": "\(error)"]
            )
            pool.queueDrained(in: journal.directory)
            return
        }
        let carried = pool.takeCarried(id)
        // What is needed of the row once it has gone whole into the request.
        let (rowURL, row, ownLimit) = (record.url, (record.destination, record.progress), record.maxBytesPerSecond)
        guard let request = pool.given.request(for: id, record: record, rowID: head.rowID) else {
            journal.remove(id)
            logger.error(
                "a journal row has an unreadable URL",
                metadata: ["haul.journal": "\(journal.path)", "haul.url": "\(rowURL)"]
            )
            return
        }
        // What admission needs of the request, read before the request goes whole to its transfer.
        // Over https with HTTP/2 offered (the requests curl is told to wait to multiplex:
        // ``EasyHandle/configure``), its host's connections are granted (``ConnectionGrants``).
        let multiplexes = settings.streamsPerConnection != nil && EasyHandle.isHTTPS(request.url.absoluteString)
        let needsHeaders = request.needsHeaders
        let maker = TransferMaker(catalog: catalog, environment: environment, controller: inbox)
        let transfer = maker.make(request, of: id, row: row, in: journal, carried: carried)
        let admitted = pool.admit(
            id,
            transfer,
            host: transfer.hostKey,
            directory: journal.directory,
            multiplexes: multiplexes,
            now: multiplexes ? reactor.clock.uptimeNanoseconds : 0
        )
        if admitted.startsTimers { startTimers() }
        environment.metrics.started.increment()
        environment.rateLimiter.admit(transfer, ownLimit: ownLimit)
        // Restored from the journal, which has header names only: never sent without their values.
        perform(
            transfer.apply(.admit(needsHeaders: needsHeaders, reportsAnswer: admitted.reportsAnswer)),
            for: transfer
        )
    }
}
