import Synchronization

/// Counts a manager's per-download objects: a queued download must have none.
package final class Census: Sendable {
    /// ``Download`` handles alive.
    package let downloads = Atomic<Int>(0)
    /// Admitted transfers alive.
    package let transfers = Atomic<Int>(0)

    package init() {}
}
