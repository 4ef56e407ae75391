/// A token bucket: `rate` bytes per second, held up to `capacity`. Taking more than it holds leaves
/// a debt, which later bytes wait out: over any long stretch, what passes is the rate, exactly, plus
/// at most the capacity and one chunk. Pure: times are given (uptime nanoseconds).
struct TokenBucket: Equatable, Sendable {
    private(set) var rate: Double
    private(set) var tokens: Double
    private var lastRefill: UInt64

    /// A bucket of `rate` bytes per second, full.
    init(rate: Int64, now: UInt64) {
        self.rate = Double(rate)
        self.lastRefill = now
        self.tokens = 0
        self.tokens = capacity
    }

    /// What a bucket holds at most: a twentieth of a second of its rate, and at least 2 KiB. With
    /// chunks kept below a twentieth of the rate too (the limited transfers' receive buffers), what
    /// passes in any 10 s exceeds the rate by at most 1 % (3 % at 10 KB/s), and a transfer is not
    /// held for every chunk.
    var capacity: Double { max(2 * 1024, rate / 20) }

    /// Adds what the time since the last refill brought.
    mutating func refill(now: UInt64) {
        guard now > lastRefill else { return }
        tokens = min(capacity, tokens + rate * Double(now - lastRefill) / 1e9)
        lastRefill = now
    }

    /// `bytes` passed (the bucket may go into debt).
    mutating func take(_ bytes: Int, now: UInt64) {
        refill(now: now)
        tokens -= Double(bytes)
    }

    /// Whether bytes must wait (after a refill at `now`).
    mutating func mustWait(now: UInt64) -> Bool {
        refill(now: now)
        return tokens < 0
    }

    /// Nanoseconds until the debt is paid (0 when there is none).
    var wait: UInt64 { tokens >= 0 ? 0 : UInt64((-tokens / rate * 1e9).rounded(.up)) }

    /// Another rate from now on; what it holds stays (within the new capacity).
    mutating func setRate(_ rate: Int64, now: UInt64) {
        refill(now: now)
        self.rate = Double(rate)
        tokens = min(tokens, capacity)
    }
}
