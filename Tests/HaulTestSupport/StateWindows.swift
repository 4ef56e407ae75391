import Synchronization

@testable import HaulIO
@testable import HaulScheduler
@testable import HaulTransfer
@testable import HaulValues

// What tests read of the library's state to check its invariants (a slot occupied, buffers idle, the
// page cache grown during a bulk enqueue): read here from the types' own storage, so that the
// library carries no member that only a test uses.

extension Admission {
    /// How many slots are occupied.
    var active: Int { occupants.count }
    /// How many downloads wait on the disk to finish.
    var finishingCount: Int { finishing.count }
    /// Whether `id` occupies a slot.
    func hasSlot(_ id: HaulValues.DownloadID) -> Bool { occupants[id] != nil }
}

extension BufferPool {
    /// How many buffers are idle now.
    var idleCount: Int { idle.withLock { $0.items.count } }
    /// The most buffers in use at once so far.
    var peakInUseCount: Int { peak.load(ordering: .relaxed) }
}

extension BodyBlocks {
    /// How many bytes of released bodies are kept now.
    var keptBytes: Int { kept.withLock { $0.bytes } }
}

extension SpeedMeter {
    /// How many samples the meter holds (bounded by about ten).
    var sampleCount: Int { samples.count }
}

extension FileSink {
    /// Whether the partial file is open now.
    var holdsDescriptor: Bool { descriptor >= 0 }
}

extension Journal {
    /// The page cache's size now, in KiB.
    var pageCacheKiB: Int {
        locked { -(Int((try? queryText("PRAGMA cache_size")) ?? "") ?? 0) }
    }
}
