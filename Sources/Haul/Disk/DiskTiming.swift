import Synchronization

/// How long disk jobs take lately, which decides how many lanes run them (see ``DiskLanes``). A job
/// may move to another lane when the count changes; that only reorders reports the scheduler
/// already tolerates (a sync of a file that was renamed meanwhile fails and is ignored; synced
/// lengths only grow).
final class DiskTiming: Sendable {
    /// A job slower than this (on average) means a disk that syncs: use every lane.
    static let slowJob: UInt64 = 200_000  // nanoseconds
    /// A moving average of the time per job, in nanoseconds.
    private let average = Atomic<UInt64>(0)

    /// Adds a batch of `jobs` that took `nanoseconds` in all (lanes race benignly: an estimate).
    func record(nanoseconds: UInt64, jobs: Int) {
        guard jobs > 0 else { return }
        let sample = nanoseconds / UInt64(jobs)
        let old = average.load(ordering: .relaxed)
        average.store((old * 3 + sample) / 4, ordering: .relaxed)
    }

    /// How many of `available` lanes to use now.
    func lanes(of available: Int) -> Int {
        average.load(ordering: .relaxed) > Self.slowJob ? available : 1
    }
}
