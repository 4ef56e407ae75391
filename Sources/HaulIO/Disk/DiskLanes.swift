import Dispatch

/// Where partial files are synced, checked and renamed, away from the loop thread: serial lanes, a
/// download's jobs in the one its id picks. While disk jobs are slow (a disk's `fdatasync`), all
/// lanes are used: syncs from several threads share the file system's journal commits (8 threads
/// synced 4,700 new 64 KiB files a second on this machine's ext4, one thread 1,600), and a lane
/// writes its batch while another's `syncfs` runs (which the lanes waiting for one share,
/// ``SharedSync``). While they are fast (tmpfs), one lane: more would only take CPU from the loop
/// thread.
///
/// The loop collects a turn's jobs (``add(_:)``) and sends them together when the turn ends
/// (``send()``): one thread wake-up for many downloads. Loop thread only.
package final class DiskLanes {
    private let lanes = (0..<8).map { Lane(label: "haul.disk.\($0)") }

    /// A serial queue and the jobs waiting for it: while it runs a batch, the jobs sent meanwhile
    /// wait, and the next batch takes them all (one sync for all of them, ``DiskJob/perform(_:clock:)``).
    /// The loop hands a turn's batch over with no lock (``CommandQueue``: one compare-and-swap); a
    /// batch that finds none waiting starts a run of the queue, which takes what waits until nothing
    /// does.
    final class Lane: Sendable {
        let queue: DispatchQueue
        let waiting = CommandQueue<[DiskJob]>()

        init(label: String) { queue = DispatchQueue(label: label) }
    }
    private let timing = DiskTiming()
    /// Called on a lane's thread with its results.
    private let report: @Sendable ([DiskResult]) -> Void
    /// The current turn's jobs.
    private var jobs: [DiskJob] = []
    /// Jobs sent or waiting, not yet reported.
    package private(set) var pending = 0

    /// - Parameter report: called on a lane's thread with each batch's results.
    package init(report: @escaping @Sendable ([DiskResult]) -> Void) {
        self.report = report
    }

    /// Queues a job; it leaves with the others at the end of the turn. Every job is matched by one
    /// result in a later report.
    package func add(_ job: DiskJob) {
        pending += 1
        jobs.append(job)
    }

    /// Sends the turn's jobs to their lanes; each lane reports its results (on its own thread).
    package func send() {
        guard !jobs.isEmpty else { return }
        let laneCount = timing.lanes(of: lanes.count)
        var batches: [[DiskJob]]
        if laneCount == 1 {
            batches = [jobs]  // on one lane, the turn's jobs as they are: no hashing, no copies
        } else {
            batches = [[DiskJob]](repeating: [], count: laneCount)
            for job in jobs {
                batches[Int(UInt(bitPattern: job.id.hashValue) % UInt(laneCount))].append(job)
            }
        }
        jobs.removeAll(keepingCapacity: true)
        let (timing, report) = (timing, report)
        for (lane, batch) in zip(lanes, batches) where !batch.isEmpty {
            // A batch behind others is taken by the run the first of them started (or by the one
            // still running: a run takes until nothing waits, and a run started meanwhile then
            // finds nothing).
            if lane.waiting.push(batch) == .first {
                lane.queue.async { Self.drain(lane, timing: timing, report: report) }
            }
        }
    }

    /// Runs `lane`'s waiting jobs, a batch at a time, until none waits.
    private static func drain(_ lane: Lane, timing: DiskTiming, report: @Sendable ([DiskResult]) -> Void) {
        while true {
            let sent = lane.waiting.takeAll()
            guard !sent.isEmpty else { return }
            let batch = sent.count == 1 ? sent[0] : Array(sent.joined())
            var clock = SyncClock()
            let results = DiskJob.perform(batch, clock: &clock)
            timing.record(syncNanoseconds: clock.nanoseconds)
            report(results)
        }
    }

    /// `count` results came back.
    package func reported(_ count: Int) {
        pending -= count
    }
}
