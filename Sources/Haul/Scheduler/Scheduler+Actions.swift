import Dispatch
import FoundationEssentials

/// The actions of a download's machine that reach beyond its transfer: a pause, a retry, a failure, a
/// cancel or a completion frees its slot and makes it a journal row again (or removes the row).
extension Scheduler {
    /// Performs an action a transfer returned (its own ones, requests and bodies, it performed).
    func perform(_ action: DownloadStateMachine.Action, for transfer: Transfer) {
        switch action {
        case .none, .startRequest, .acceptBody, .rejectBody, .tryNextURL:
            break
        case .refreshURL(let cause):
            askForFreshURL(for: transfer, after: cause)
        case .askForHeaders:
            askForHeaders(of: transfer, named: transfer.headerNames)
        case .pause:
            // A pause while the manager shuts down interrupts: the next manager continues the download.
            let progress = transfer.endPaused(interrupted: shuttingDown)
            requestSync(of: transfer, bytes: progress.bytesReceived)
            // A paused download is a row again; resuming queues it.
            forget(transfer)
        case .cancel:
            transfer.endCancelled()
            catalog.forget(transfer.id)
            forget(transfer)
        case .complete where transfer.writesToStream:
            // Written through: complete once the reader took every byte (the slot stays taken).
            transfer.stopAll()
            let id = transfer.id
            transfer.finishStream { [unowned self] result in
                finished(id, outcome: result.map { PlacedFile(length: $0, modificationTime: 0) })
            }
        case .complete:
            disk.add(.finish(transfer.finishJob(keepingDestination: false)))
            admission.startFinishing(transfer.id)
        case .keepDestination:
            disk.add(.finish(transfer.finishJob(keepingDestination: true)))
            admission.startFinishing(transfer.id)
        case .retry(let error):
            retry(transfer, after: error)
        case .fail(let error):
            fail(transfer, with: error)
        }
    }

    /// Queues the download again after a backoff (or the server's `Retry-After`), keeping its bytes.
    private func retry(_ transfer: Transfer, after error: DownloadError) {
        let delay = transfer.retryDelay(retryPolicy)
        let time = Date().timeIntervalSince1970 + delay.inSeconds
        if transfer.restarts > 0 { restartsBeforeRetry[transfer.id] = transfer.restarts }
        let progress = transfer.endWaitingToRetry(after: error, delay: delay, at: time)
        requestSync(of: transfer, bytes: progress.bytesReceived)
        forget(transfer)
        wakeForRetry(in: transfer.directory, at: time)
    }

    /// Ends the download with `error`, keeping its partial file if it holds anything.
    private func fail(_ transfer: Transfer, with error: DownloadError) {
        transfer.endFailed(error)
        catalog.forget(transfer.id)
        forget(transfer)
    }

    /// The disk thread finished a download's file: record and report the completion, or the failure.
    func finished(_ id: DownloadID, outcome: Result<PlacedFile, DownloadError>) {
        guard let transfer = transfers[id] else { return }
        let placed: PlacedFile
        switch outcome {
        case .failure(let error):
            perform(transfer.completionFailed(error), for: transfer)
            return
        case .success(let file):
            placed = file
        }
        transfer.endCompleted(placed)
        catalog.forget(transfer.id)
        forget(transfer)
    }

    /// The download paused or ended: it frees its slot (a finishing one, which gave its slot up when
    /// its bytes were all received, leaves the finishing count) and becomes a row again.
    func forget(_ transfer: Transfer) {
        admission.stopTransferring(transfer.id)
        connectionWaiters[transfer.id] = nil
        for (id, waiter) in connectionWaiters where transfers[id] === waiter { waiter.askForConnections() }
        guard transfers.removeValue(forKey: transfer.id) != nil else { return }
        environment.rateLimiter.release(transfer)
        // Its row holds the name it chose now (or it has no row: the name is free again).
        if let name = transfer.claimedName { environment.claimedNames.remove(name) }
        let directory = transfer.directory
        let left = (transfersByDirectory[directory] ?? 1) - 1
        transfersByDirectory[directory] = left > 0 ? left : nil
        if left <= 0, !admission.queuedDirectories.contains(directory) { closeJournalIfIdle(directory) }
    }

    /// Closes the journal of `directory` if no transfer uses it and nothing in it is unfinished (see
    /// ``Catalog/closeIfIdle(_:)``); the configured state directory's stays open.
    func closeJournalIfIdle(_ directory: String) {
        guard transfersByDirectory[directory] == nil, !shuttingDown, directory != keptDirectory else { return }
        catalog.closeIfIdle(directory)
    }
}
