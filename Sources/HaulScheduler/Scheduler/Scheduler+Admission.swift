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

    /// Admits queued downloads while slots are free, the best head across every journal first
    /// (``QueueReader``), and arms the retry timer if a read set up a retry to wake for.
    func admitWaiting() {
        var reader = QueueReader(catalog: catalog, clock: reactor.clock, logger: logger)
        while !pool.isShuttingDown, pool.admission.hasFreeSlot {
            guard let (journal, head, pending) = reader.next(&pool) else { break }
            admit(head, from: journal, unchangedSince: &pending.heads.changes)
        }
        armRetryTimer(after: reader.retryTimerDelay)
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
        guard let request = callers.request(for: id, record: record, rowID: head.rowID) else {
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
