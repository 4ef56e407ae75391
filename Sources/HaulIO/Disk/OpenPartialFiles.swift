/// Counts the partial files sinks hold open between writes, against their share of the budget.
/// Loop thread only (as the sinks).
package final class OpenPartialFiles {
    /// The most that stay open between writes.
    let limit: Int
    /// How many are open now.
    package private(set) var count = 0

    package init(limit: Int) {
        self.limit = max(1, limit)
    }

    func opened() { count += 1 }
    func closed() { count -= 1 }

    /// Whether a sink that has just written should close its file again.
    var isOverLimit: Bool { count > limit }
}
