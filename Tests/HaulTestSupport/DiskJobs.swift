@testable import Haul
@testable import HaulIO
@testable import HaulValues

// The disk jobs without a clock: the lanes time their syncs (``SyncClock``), the tests only look at
// the results.

extension DiskJob {
    static func perform(_ batch: [DiskJob]) -> [DiskResult] {
        var clock = SyncClock()
        return perform(batch, clock: &clock)
    }
}

extension FinishJob {
    func perform() -> Result<PlacedFile, HaulValues.DownloadError> {
        var clock = SyncClock()
        return perform(clock: &clock)
    }
}
