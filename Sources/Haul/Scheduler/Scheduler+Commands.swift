import Glibc

/// What callers ask of downloads (pause, resume, cancel) and of the manager (shut down), on the loop.
extension Scheduler {
    func pause(_ download: Download) {
        if let transfer = transfers[download.id] {
            perform(transfer.pause(), for: transfer)
            return
        }
        // Queued or interrupted: only its row changes.
        updateRow(of: download, from: [.queued, .interrupted]) { record in
            record.state = .paused
            download.hub.publish(.paused(record.progress))
        }
    }

    func resume(_ download: Download) {
        if transfers[download.id] != nil { return }  // admitted: it is not paused
        updateRow(of: download, from: [.paused, .interrupted]) { record in
            record.state = .queued
            record.queueSequence = catalog.nextQueueSequence()
            download.hub.publish(.queued)
        }
        admission.queueChanged(in: download.stateDirectoryPath)
    }

    func cancel(_ download: Download) {
        if let transfer = transfers[download.id] {
            perform(transfer.cancel(), for: transfer)
            return
        }
        guard let journal = catalog.openJournal(for: download.stateDirectoryPath) else { return }
        journal.locked {
            guard let record = try? journal.record(for: download.id),
                [.queued, .paused, .interrupted].contains(record.state)
            else { return }
            journal.remove(download.id)
            restartsBeforeRetry[download.id] = nil
            download.hub.publish(.cancelled)
        }
    }

    /// Changes the row of a download that is not admitted, if it is in one of `states`; `change`
    /// runs with the journal locked (so events it publishes come before the loop's next ones).
    private func updateRow(
        of download: Download,
        from states: Set<DownloadRecord.State>,
        _ change: (inout DownloadRecord) -> Void
    ) {
        guard let journal = catalog.openJournal(for: download.stateDirectoryPath) else { return }
        journal.locked {
            guard var record = try? journal.record(for: download.id), states.contains(record.state) else { return }
            change(&record)
            do {
                try journal.save(record, for: download.id)
            } catch {
                logger.warning(
                    "could not write the journal",
                    metadata: ["url": "\(download.url.redactedString)", "error": "\(error)"]
                )
            }
        }
    }

    /// Pauses every transfer (interrupted, not paused: the next manager on the journal continues
    /// them) and stops the loop once their syncs are recorded.
    func shutdown() {
        shuttingDown = true
        for transfer in Array(transfers.values) where !transfer.machine.isDone {
            perform(transfer.pause(), for: transfer)
            // Queued, not paused: the journal marks it interrupted, and the next manager continues it.
            transfer.checkpoint(state: .queued, bytes: transfer.progress().bytesReceived)
        }
        // The pauses above asked for syncs; the journals close once those are recorded.
        if disk.pending == 0 {
            finishShutdown()
        } else {
            stopWhenSynced = true
        }
    }

    func finishShutdown() {
        let handles = transfers.values.map(\.download) + catalog.liveHandles
        for download in handles {
            download.hub.close(with: DownloadError(code: .shutdown, url: download.url.redactedString))
        }
        transfers.removeAll()
        admission.forgetQueues()
        reactorTurnDidEnd(reactor)
        catalog.closeJournals()
        catalog.resumeIdleWaiters()
        // Every easy handle goes before the share they use.
        environment.easyHandles.close()
        reactor.stop()
    }
}
