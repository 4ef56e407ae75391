/// Measures a transfer's recent speed from (time, bytes) samples over a sliding window, and derives
/// the time left. Pure: time comes in as nanoseconds from any monotonic clock.
struct SpeedMeter: Sendable {
    /// How far back the rate looks.
    var window: UInt64 = 3_000_000_000
    private var samples: [(time: UInt64, bytes: Int64)] = []
    /// How many samples it holds (about ten, however often it is fed).
    var sampleCount: Int { samples.count }

    /// Records that `bytes` had been written by `time`.
    ///
    /// Samples closer than an eighth of the window to the one before are merged into the newest, so a
    /// meter holds about ten samples however often it is fed (thousands of slow transfers each report
    /// every chunk).
    mutating func record(bytes: Int64, at time: UInt64) {
        if let last = samples.last, bytes < last.bytes {
            samples.removeAll()  // restarted from zero
        }
        if samples.count >= 2, time &- samples[samples.count - 2].time < window / 8 {
            samples[samples.count - 1] = (time, bytes)
        } else {
            if samples.isEmpty { samples.reserveCapacity(12) }
            samples.append((time, bytes))
        }
        // Keep one sample at or before the window's start so the rate covers the whole window.
        while samples.count > 2, time - samples[1].time >= window {
            samples.removeFirst()
        }
    }

    /// Forgets every sample (after a pause the old rate means nothing).
    mutating func reset() {
        samples.removeAll()
    }

    /// Bytes per second over the window, or 0 before two samples exist.
    var bytesPerSecond: Double {
        guard let first = samples.first, let last = samples.last, last.time > first.time else { return 0 }
        return Double(last.bytes - first.bytes) * 1e9 / Double(last.time - first.time)
    }

    /// The time to receive `total - received` bytes at the current speed.
    func estimatedTimeRemaining(received: Int64, total: Int64?) -> Duration? {
        guard let total, total >= received else { return nil }
        let speed = bytesPerSecond
        guard speed > 0 else { return total == received ? .zero : nil }
        return .nanoseconds(Int64(Double(total - received) / speed * 1e9))
    }
}
