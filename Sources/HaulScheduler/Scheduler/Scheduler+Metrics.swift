import Dispatch
import FoundationEssentials
import HaulIO

/// The gauges of ``HaulMetrics``, set at the end of each loop turn.
extension Scheduler {
    /// Downloads admitted and not ended (receiving, or waiting on the disk), write buffers in use and
    /// partial files open; and, at most once a second, the rows queued and waiting for a retry in the
    /// open journals (a count over the queue's index) and the process's open descriptors. Nothing
    /// while no backend records.
    func updateGauges() {
        let metrics = environment.metrics
        guard metrics.isRecording else { return }  // no backend: no call at all
        metrics.running.record(pool.count)
        metrics.writeBuffersInUse.record(environment.buffers.inUseCount)
        metrics.partialFilesOpen.record(environment.openPartialFiles.count)
        let now = DispatchTime.now().uptimeNanoseconds
        guard now &- timers.gaugesReadAt >= 1_000_000_000 else { return }
        timers.gaugesReadAt = now
        var queued = 0
        var waiting = 0
        let time = Date().timeIntervalSince1970
        for journal in catalog.openJournals {
            guard let counts = try? journal.queueCounts(at: time) else { continue }
            queued += counts.queued
            waiting += counts.waitingToRetry
        }
        metrics.queued.record(queued)
        metrics.waitingToRetry.record(waiting)
        if let open = DescriptorBudget.openCount() { metrics.openDescriptors.record(open) }
    }
}

extension Scheduler {
    /// The most write buffers in use at once so far, and the names claimed for files about to be
    /// placed now (the facade's ``DownloadManager/holdings``). Loop thread, or after the loop ended.
    package var bufferPeakAndClaimedNames: (peakBuffers: Int, claimedNames: Int) {
        (environment.buffers.peakInUseCount, environment.claimedNameCount)
    }
}
