import FoundationEssentials

/// When a transiently failed download tries again: exponential backoff with jitter, or the server's
/// `Retry-After`. Pure; the caller supplies the random number.
package struct RetryPolicy: Sendable {
    /// The first delay; each further failure doubles it.
    package var baseDelay: Duration
    /// The longest backoff delay.
    var maximumDelay: Duration

    package init(baseDelay: Duration, maximumDelay: Duration) {
        self.baseDelay = baseDelay
        self.maximumDelay = maximumDelay
    }
    /// The longest `Retry-After` honoured (a server asking for a day is asking for too much).
    static let longestRetryAfter: Duration = .seconds(3600)
    /// An attempt that brought at least this many bytes before it failed was served: the next one
    /// follows within a tenth of ``baseDelay`` rather than after a backoff.
    static let servedAttempt: Int64 = 64 * 1024

    /// The delay before the next attempt.
    ///
    /// - Parameters:
    ///   - failures: consecutive failed attempts so far, at least 1.
    ///   - retryAfter: what the server asked for, if it did.
    ///   - random: a number in `0..<1`; the delay is between half and all of the backoff ("equal
    ///     jitter"), so that downloads failing together do not retry together.
    ///   - served: the failed attempt brought at least ``servedAttempt`` bytes (a connection cut
    ///     mid-body): the server is up and serving, and the next attempt follows at once, spread over
    ///     a tenth of ``baseDelay``. (An attempt that brings less, or nothing, backs off: a server
    ///     that cuts every connection after a few bytes is not asked again at once.)
    func delay(afterFailures failures: Int, retryAfter: Duration?, random: Double, served: Bool = false) -> Duration {
        if let retryAfter { return min(max(.zero, retryAfter), Self.longestRetryAfter) }
        let random = min(max(random, 0), 1)
        if served { return min(maximumDelay, max(.zero, baseDelay) * (0.1 * random)) }
        let exponent = min(max(0, failures - 1), 40)
        let base = max(.zero, baseDelay)
        let backoff = min(maximumDelay, base * Double(1 << min(exponent, 30)))
        return backoff * (0.5 + 0.5 * random)
    }

    /// Parses `Retry-After`: delay-seconds, or an HTTP date (any of the three forms) relative to `now`.
    static func parseRetryAfter(_ value: String?, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingWhitespace, !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            guard value.utf8.count <= 9, let seconds = Int(value) else { return longestRetryAfter }
            return .seconds(seconds)
        }
        guard let date = HTTPDate.parse(value) else { return nil }
        return .milliseconds(max(0, Int64(date.timeIntervalSince(now) * 1000)))
    }
}
