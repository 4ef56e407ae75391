/// Bandwidth limits in bytes per second (`nil`: none), as the layers below take them (the
/// facade's public `RateLimits` says what each means).
package struct RateLimits: Sendable, Hashable {
    package var perDownload: Int64?
    package var perHost: Int64?
    package var total: Int64?

    /// Limits in bytes per second; `nil` for none.
    package init(perDownload: Int64? = nil, perHost: Int64? = nil, total: Int64? = nil) {
        self.perDownload = perDownload
        self.perHost = perHost
        self.total = total
    }

    /// The same limits, each at least 1 byte per second.
    package var normalized: RateLimits {
        RateLimits(
            perDownload: perDownload.map { max(1, $0) },
            perHost: perHost.map { max(1, $0) },
            total: total.map { max(1, $0) }
        )
    }
}
