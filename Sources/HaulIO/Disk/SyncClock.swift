import Dispatch
import Glibc

/// The time a batch of disk jobs spends in syncs (``DiskTiming``).
struct SyncClock {
    private(set) var nanoseconds: UInt64 = 0

    /// Runs `body` (a sync), adding the time it took.
    mutating func timed<T>(_ body: () -> T) -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        defer { nanoseconds += DispatchTime.now().uptimeNanoseconds - start }
        return body()
    }

    /// `fdatasync(descriptor)`, timed: whether it succeeded.
    mutating func fdatasync(_ descriptor: Int32) -> Bool {
        timed { Glibc.fdatasync(descriptor) == 0 }
    }
}
