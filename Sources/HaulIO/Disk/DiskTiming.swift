import Dispatch
import Glibc
import Synchronization

/// How long disk jobs wait for syncs lately, which decides how many lanes run them (see
/// ``DiskLanes``). A job may move to another lane when the count changes; that only reorders
/// reports the scheduler already tolerates (a sync of a file that was renamed meanwhile fails and is
/// ignored; synced lengths only grow).
///
/// Only the syncs count (``SyncClock``), not the batch's writes and names: timed whole, a batch
/// written to tmpfs on two cores beside a busy loop thread could take longer per job than a disk's
/// sync only because it waited for a processor, and then all eight lanes stayed in use, waiting for
/// the processor the more for it (seen in a profiled `haul -i` to tmpfs: eight lane threads with 0.64
/// CPU s among them, where one lane takes 0.48 s). Timed by their syncs, tmpfs batches always keep
/// one lane and ext4's always all.
final class DiskTiming: Sendable {
    /// A batch that waited longer than this for its syncs (on average) means a disk that syncs: use
    /// every lane, so that others write while one waits. tmpfs and ramfs wait for nothing.
    static let slowSync: UInt64 = 200_000  // nanoseconds
    /// A moving average of a batch's time in syncs, in nanoseconds.
    private let average = Atomic<UInt64>(0)

    /// Adds a batch that waited `syncNanoseconds` for its syncs (lanes race benignly: an estimate).
    func record(syncNanoseconds: UInt64) {
        let old = average.load(ordering: .relaxed)
        average.store((old * 3 + syncNanoseconds) / 4, ordering: .relaxed)
    }

    /// How many of `available` lanes to use now.
    func lanes(of available: Int) -> Int {
        average.load(ordering: .relaxed) > Self.slowSync ? available : 1
    }
}
