import Dispatch
import FoundationEssentials
import HaulTransfer
import HaulValues

/// What a transfer hands back that reaches beyond it (``SlotAction``): a pause, a retry, a failure,
/// a cancel or a completion frees its slot and makes it a journal row again (or removes the row).
extension Scheduler {
    /// Does what a transfer handed back once it carried out its own part (``SlotAction``).
    func perform(_ action: SlotAction?, for transfer: Transfer) {
        reactor.assertOnLoop()
        guard let action else { return }  // an input that was not for it now
        switch action {
        case .none:
            break
        case .askForHeaders(let question):
            callers.askForHeaders(question, for: transfer)
        case .askForFreshURL(let question):
            callers.askForFreshURL(question, for: transfer)
        case .paused(let sync):
            requestSync(transfer.id, sync)
            // A paused download is a row again; resuming queues it.
            leave(transfer, carrying: BetweenAttempts(leaving: transfer, restarts: 0))
        case .end:
            forget(transfer.id)
            leave(transfer)
        case .retry(let time, let sync, let restarts):
            requestSync(transfer.id, sync)
            // Restarts from zero are carried to its next attempt, with its handle's counts.
            leave(transfer, carrying: BetweenAttempts(leaving: transfer, restarts: restarts))
            wakeForRetry(in: transfer.handle.stateDirectoryPath, at: time)
        case .finish(let job):
            disk.add(.finish(job))
            takeAnswer(of: transfer)
            pool.startFinishing(transfer.id)
        case .finishStream:
            let id = transfer.id
            let done: (Result<Int64, DownloadError>) -> Void = { [unowned self] result in
                placed(id, outcome: result.map { PlacedFile(length: $0, modificationTime: 0) })
            }
            perform(transfer.apply(.finishStream(done)), for: transfer)
        case .openConnections:
            ConnectionGranter.want(for: transfer, &pool)
        case .answered:
            takeAnswer(of: transfer)
        case .leftHost:
            pool.leftHost(transfer.id)
        }
    }

    /// Performs what transfers handed up with no caller (``TransferEnvironment/deferred``), in order:
    /// a request ended (its slot, its connections, the next admission follow as after curl's own
    /// report of an end), or more connections wanted.
    func performDeferred() {
        for (transfer, action) in environment.takeDeferred() where isCurrent(transfer) {
            perform(action, for: transfer)
            switch action {
            case .openConnections, .answered, .leftHost: continue
            default: break
            }
            ConnectionGranter.changed(transfer, &pool)
            admitAtTurnEnd()
        }
    }

    /// What `transfer`'s first answer showed of its host, if not taken yet, goes to the connections'
    /// grant (``ConnectionGrants``); more may be admitted.
    private func takeAnswer(of transfer: Transfer) {
        guard let answer = transfer.takeAnswer() else { return }
        pool.answered(transfer.id, multiplexes: answer.multiplexes, socketsOpened: answer.socketsOpened)
    }

    /// The disk thread finished a download's file: its transfer completes, or goes on as the
    /// failure says.
    func placed(_ id: DownloadID, outcome: Result<PlacedFile, DownloadError>) {
        guard let transfer = admitted(id) else { return }
        perform(transfer.apply(.placed(outcome)), for: transfer)
    }

    /// The download paused or ended: it frees its slot (a finishing one, which gave its slot up when
    /// its bytes were all received, leaves the finishing count) and becomes a row again, `carrying`
    /// what its next attempt here starts from (``BetweenAttempts``; `nil`: it ended).
    func leave(_ transfer: Transfer, carrying: BetweenAttempts? = nil) {
        takeAnswer(of: transfer)
        let leaving = pool.leave(transfer.id, carrying: carrying)
        for waiter in leaving.waiting { ConnectionGranter.want(for: waiter, &pool) }
        guard let left = leaving.left else { return }
        environment.rateLimiter.release(left)
        if let directory = leaving.idleJournal { catalog.closeIfIdle(directory) }
    }

    /// A download ended (completed, failed, cancelled, handed over, followed to its end): nothing is
    /// kept of it, neither what its caller gave (``CallerGiven``) nor what an attempt carried.
    func forget(_ id: DownloadID) {
        pool.forget(id)
        callers.forget(id)
    }
}
