import Synchronization

/// Counts a manager's per-download objects: a queued download must have none.
final class Census: Sendable {
    /// ``Download`` handles alive.
    let downloads = Atomic<Int>(0)
    /// Admitted transfers alive.
    let transfers = Atomic<Int>(0)
}
