import FoundationEssentials

/// When a transiently failed download tries again: exponential backoff with jitter, or the server's
/// `Retry-After`. Pure; the caller supplies the random number.
struct RetryPolicy: Sendable {
    /// The first delay; each further failure doubles it.
    var baseDelay: Duration
    /// The longest backoff delay.
    var maximumDelay: Duration
    /// The longest `Retry-After` honoured (a server asking for a day is asking for too much).
    static let longestRetryAfter: Duration = .seconds(3600)

    /// The delay before the next attempt.
    ///
    /// - Parameters:
    ///   - failures: consecutive failed attempts so far, at least 1.
    ///   - retryAfter: what the server asked for, if it did.
    ///   - random: a number in `0..<1`; the delay is between half and all of the backoff ("equal
    ///     jitter"), so that downloads failing together do not retry together.
    func delay(afterFailures failures: Int, retryAfter: Duration?, random: Double) -> Duration {
        if let retryAfter { return min(max(.zero, retryAfter), Self.longestRetryAfter) }
        let exponent = min(max(0, failures - 1), 40)
        let base = max(.zero, baseDelay)
        let backoff = min(maximumDelay, base * Double(1 << min(exponent, 30)))
        return backoff * (0.5 + 0.5 * min(max(random, 0), 1))
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
