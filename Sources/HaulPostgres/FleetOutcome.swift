import FoundationEssentials
import Haul

/// What became of a leased download, for ``FleetQueue/record(_:)``.
public struct FleetOutcome: Sendable, Hashable {
    /// How it ended.
    public enum Result: Sendable, Hashable {
        /// Whole at its destination, `bytes` long.
        case completed(bytes: Int64)
        /// Given up on for good.
        case failed(reason: String)
    }

    /// The lease it ran under.
    public let lease: FleetLease
    /// How it ended.
    public let result: Result
    /// The class of a failure (``DownloadError/category``), when it came from a download's error:
    /// what `haul --queue --wait` exits with.
    public let category: DownloadError.Category?

    /// `lease`'s download ended with `result` (a failure of `category`).
    public init(_ lease: FleetLease, _ result: Result, category: DownloadError.Category? = nil) {
        self.lease = lease
        self.result = result
        self.category = category
    }

    var state: FleetState {
        if case .completed = result { .completed } else { .failed }
    }
}
