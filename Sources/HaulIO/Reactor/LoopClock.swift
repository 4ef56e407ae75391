import Dispatch
import FoundationEssentials

/// The loop's time: the system's (uptime for durations, the wall clock for what rows record), or,
/// for a loop a test drives by hand (``Reactor/advance(by:)``), a clock that moves only when the
/// test moves it, as NIOEmbedded's `EmbeddedEventLoop.advanceTime(by:)`. Everything on the
/// loop that measures time (stalls, speeds, retries, timers) reads it here.
package final class LoopClock: @unchecked Sendable {
    // @unchecked Sendable: `offset` changes only on the thread that drives a manual clock's loop,
    // between its turns; the system clock has no state.

    /// Where a manual clock started: uptime nanoseconds and wall-clock seconds.
    private let start: (uptime: UInt64, wall: Double)?
    /// How far a manual clock has moved, in nanoseconds.
    private var offset: UInt64 = 0

    /// The system's clock.
    package static let system = LoopClock(start: nil)

    private init(start: (uptime: UInt64, wall: Double)?) { self.start = start }

    /// A clock that stands at `uptime` nanoseconds and `wall` seconds since 1970 until moved.
    package static func manual(
        uptime: UInt64 = 1_000_000_000_000,
        wall: Double = 1_800_000_000
    ) -> LoopClock {
        LoopClock(start: (uptime, wall))
    }

    /// Whether the clock moves only by ``advance(toUptime:)``.
    package var isManual: Bool { start != nil }

    /// Monotonic nanoseconds (the system's uptime, or the manual clock's).
    package var uptimeNanoseconds: UInt64 {
        guard let start else { return DispatchTime.now().uptimeNanoseconds }
        return start.uptime &+ offset
    }

    /// Seconds since 1970 (what rows record: a retry's time, an update's).
    package var wallSeconds: Double {
        guard let start else { return Date().timeIntervalSince1970 }
        return start.wall + Double(offset) / 1e9
    }

    /// The wall clock's now as a date.
    package var date: Date { start == nil ? Date() : Date(timeIntervalSince1970: wallSeconds) }

    /// Moves a manual clock forward to `uptime` nanoseconds (nothing when it is there already, or
    /// for the system's clock).
    package func advance(toUptime uptime: UInt64) {
        guard let start, uptime > start.uptime &+ offset else { return }
        offset = uptime &- start.uptime
    }
}

/// What a test gives a manager whose loop it drives by hand: the clock it moves, and the Unix
/// socket of the server it plays, where every connection goes whatever the URL's host.
package struct DrivenLoop: Sendable {
    package let clock: LoopClock
    package let unixSocketPath: String

    package init(clock: LoopClock, unixSocketPath: String) {
        self.clock = clock
        self.unixSocketPath = unixSocketPath
    }
}
