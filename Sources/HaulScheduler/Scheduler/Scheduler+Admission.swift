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

    /// Admits `head` of `journal` (``TransferMaker``) and tells its transfer its first input.
    private func admit(_ head: Journal.QueuedRow, from journal: Journal, unchangedSince changes: inout Int64) {
        let maker = TransferMaker(catalog: catalog, environment: environment, controller: inbox, settings: settings)
        guard
            let admitted = maker.admit(head, from: journal, unchangedSince: &changes, callers: callers, into: &pool)
        else { return }
        if admitted.startsTimers { startTimers() }
        perform(admitted.transfer.apply(admitted.input), for: admitted.transfer)
    }
}
