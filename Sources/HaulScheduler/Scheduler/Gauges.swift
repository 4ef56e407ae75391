import Dispatch
import FoundationEssentials
import HaulIO
import HaulTransfer

/// The gauges of ``HaulMetrics``, set at the end of each loop turn: downloads admitted and not
/// ended (receiving, or waiting on the disk), write buffers in use and partial files open; and, at
/// most once a second, the rows queued and waiting for a retry in the open journals (a count over
/// the queue's index) and the process's open descriptors. Nothing while no backend records. A job
/// with no state: the pool machine keeps when the journals were last read (``PoolMachine/takeJournalCountsDue(now:)``).
struct Gauges {
    let environment: TransferEnvironment
    let catalog: Catalog

    /// Sets the gauges, `running` downloads admitted; the journals' counts are read when `countsDue`
    /// says they are due at that time (uptime nanoseconds).
    func update(running: Int, countsDue: (UInt64) -> Bool) {
        let metrics = environment.metrics
        guard metrics.isRecording else { return }  // no backend: no call at all
        metrics.running.record(running)
        metrics.writeBuffersInUse.record(environment.buffers.inUseCount)
        metrics.partialFilesOpen.record(environment.openPartialFiles.count)
        let now = DispatchTime.now().uptimeNanoseconds
        guard countsDue(now) else { return }
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
