import HaulValues

/// Bandwidth limits, in bytes per second (`nil`: none). See
/// ``DownloadManager/Configuration/rateLimits`` and ``DownloadManager/setRateLimits(_:)``.
public struct RateLimits: Sendable, Hashable {
    /// Each download, unless it has a limit of its own (``DownloadRequest/maxBytesPerSecond``).
    public var perDownload: Int64?
    /// All downloads from one host (host and port) together.
    public var perHost: Int64?
    /// All downloads of the manager together.
    public var total: Int64?

    /// Limits in bytes per second; `nil` for none.
    public init(perDownload: Int64? = nil, perHost: Int64? = nil, total: Int64? = nil) {
        self.perDownload = perDownload
        self.perHost = perHost
        self.total = total
    }
}

extension RateLimits {
    /// The same limits, each at least 1 byte per second.
    var normalized: RateLimits {
        let limits = engine
        return RateLimits(perDownload: limits.perDownload, perHost: limits.perHost, total: limits.total)
    }

    /// The limits as the layers below take them, each at least 1 byte per second.
    var engine: HaulValues.RateLimits {
        HaulValues.RateLimits(perDownload: perDownload, perHost: perHost, total: total).normalized
    }
}
