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

    /// `lease`'s download ended with `result`.
    public init(_ lease: FleetLease, _ result: Result) {
        self.lease = lease
        self.result = result
    }

    var state: FleetState {
        if case .completed = result { .completed } else { .failed }
    }
}
