import CHaul
import Dispatch
import HaulIO
import HaulTransfer
import HaulValues

/// Durability off the loop thread: syncs of partial files, their reports, the periodic checkpoint,
/// and the timer that gives idle buffers and handles back.
extension Scheduler {
    /// Runs `job`, a sync of `id`'s partial file, off the loop thread (then its bytes are recorded
    /// as durable); `nil`: they are already.
    func requestSync(_ id: DownloadID, _ job: DiskJob?) {
        guard let job else { return }
        environment.syncs.requested(id)
        disk.add(job)
    }

    func diskWorkDone(_ results: [DiskResult]) {
        for result in results {
            switch result {
            case .synced(let id, let directory, let bytes, let segments):
                synced(id, directory: directory, bytes: bytes, segments: segments)
            case .placed(let id, let outcome): placed(id, outcome: outcome)
            }
        }
        disk.reported(results.count)
        // A shutdown waiting for the last report finishes now.
        if pool.diskReported(diskPending: disk.pending) { finishShutdown() }
    }

    /// A sync reported: recorded (``SyncRecords``) unless it failed or is older than a truncation
    /// of the partial file.
    private func synced(_ id: DownloadID, directory: String, bytes: Int64, segments: String?) {
        guard environment.syncs.reported(id), bytes >= 0 else { return }
        SyncRecords(catalog: catalog).record(
            id,
            directory: directory,
            bytes: bytes,
            segments: segments,
            running: admitted(id)
        )
    }

    /// Starts the checkpoint and idle-buffer timers with the first admission.
    func startTimers() {
        if settings.checkpointInterval > .zero {
            reactor.repeatEvery(settings.checkpointInterval) { [unowned self] in
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
        for transfer in pool.admitted { requestSync(transfer.id, transfer.checkpointReceiving()) }
    }

    /// Slow downloads give their buffers back (see ``FileSink``), idle buffers and easy handles are
    /// freed a whole period after they were last needed, requests that stalled are ended
    /// (``Transfer/stalledRequests(now:after:)``), and hosts whose first answer is late let their
    /// downloads go (``ConnectionGrants/answerWait``).
    private func releaseIdleBuffers() {
        let now = reactor.clock.uptimeNanoseconds
        let stallTimeout = settings.stallTimeout.nanoseconds
        var stalled: [(Transfer, UnsafeMutableRawPointer)] = []
        for transfer in pool.admitted {
            for raw in transfer.sweep(now: now, stallTimeout: stallTimeout) { stalled.append((transfer, raw)) }
        }
        for (transfer, raw) in stalled {
            // Ended as curl ends a request that timed out: another connection takes its segment, or
            // the download is retried (resuming), or it fails. (An earlier one in this list may
            // have ended the transfer already: its handles are no longer its own then.)
            guard isCurrent(transfer) else { continue }
            requestEnded(raw, .stalled(raw, seconds: settings.stallTimeout.components.seconds))
        }
        pool.expireWaits(now: now)
        buffers.trim()
        environment.easyHandles.trim()  // freed here, on the loop thread, as their deinit cleans up
    }
}
