import Glibc

/// The units Haul's C libraries and clocks take a `Duration` in, converted in one place.
extension Duration {
    /// Whole nanoseconds; 0 for a negative duration (uptime clocks count in them).
    package var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }

    /// Whole milliseconds, at least 1 (curl reads 0 as "no timeout").
    package var timeoutMilliseconds: Int {
        let (seconds, attoseconds) = components
        return max(1, Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
    }

    /// Seconds, with their fraction.
    package var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// As libevent's timers take it (microseconds).
    package var timeval: Glibc.timeval {
        let (seconds, attoseconds) = components
        return Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }
}
