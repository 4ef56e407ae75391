/// Where a download of the fleet's queue stands.
public enum FleetState: String, Sendable, Hashable, CaseIterable {
    /// Waiting for a worker.
    case queued
    /// Claimed by a worker, under its lease.
    case running
    /// Held back until resumed.
    case paused
    /// Downloaded whole by a worker.
    case completed
    /// Given up on, with the reason.
    case failed
    /// Cancelled; never taken again.
    case cancelled
}
