import Dispatch

/// Durability off the loop thread: syncs of partial files, their reports, the periodic checkpoint,
/// and the timer that gives idle buffers and handles back.
extension Scheduler {
    /// Syncs the partial file's first `bytes` off the loop thread, then records them as durable.
    func requestSync(of transfer: Transfer, bytes: Int64) {
        guard bytes > transfer.record.bytesSynced else { return }
        environment.syncs.requested(transfer.id)
        disk.add(
            .checkpoint(transfer.id, directory: transfer.store.directory, path: transfer.partialPath, bytes: bytes)
        )
    }

    func diskWorkDone(_ results: [DiskResult]) {
        for result in results {
            switch result {
            case .synced(let id, let directory, let bytes): synced(id, directory: directory, bytes: bytes)
            case .finished(let id, let outcome): finished(id, outcome: outcome)
            }
        }
        disk.reported(results.count)
        // A shutdown waiting for the last report finishes now.
        if stopWhenSynced && disk.pending == 0 {
            stopWhenSynced = false
            finishShutdown()
        }
    }

    private func synced(_ id: DownloadID, directory: String, bytes: Int64) {
        // Ignore a failed sync, and one older than a truncation of the partial file.
        guard environment.syncs.reported(id), bytes >= 0, let journal = catalog.openJournal(for: directory) else {
            return
        }
        if let transfer = transfers[id] {
            transfer.record.bytesSynced = max(transfer.record.bytesSynced, bytes)
        }
        try? journal.recordSynced(id, bytes: bytes)
    }

    /// Starts the checkpoint and idle-buffer timers with the first admission.
    func startTimers() {
        guard !timersStarted else { return }
        timersStarted = true
        if configuration.checkpointInterval > .zero {
            reactor.repeatEvery(configuration.checkpointInterval) { [unowned self] in
                checkpointReceiving()
            }
        }
        reactor.repeatEvery(.nanoseconds(Int64(FileSink.idleAge))) { [unowned self] in
            releaseIdleBuffers()
        }
    }

    /// Every `checkpointInterval`: write buffered bytes of receiving downloads to the kernel, record
    /// them, and sync them in the background.
    private func checkpointReceiving() {
        for transfer in transfers.values {
            guard let bytes = transfer.checkpointReceiving() else { continue }
            requestSync(of: transfer, bytes: bytes)
        }
    }

    /// Slow downloads give their buffers back (see ``FileSink``), and idle buffers and easy handles
    /// are freed a whole period after they were last needed.
    private func releaseIdleBuffers() {
        let now = DispatchTime.now().uptimeNanoseconds
        for transfer in transfers.values {
            transfer.releaseIdleBuffer(now: now)
        }
        buffers.trim()
        environment.easyHandles.trim()  // freed here, on the loop thread, as their deinit cleans up
    }
}
