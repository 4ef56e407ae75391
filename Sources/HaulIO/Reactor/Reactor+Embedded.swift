import CHaul
import Dispatch
import Glibc

/// A loop a test drives by hand (as NIOEmbedded's `EmbeddedEventLoop`): no thread of its own; the
/// test runs its turns (``run()``) and moves its clock (``advance(by:)``), so that a sequence of a
/// download (admitted, answered, stalled, retried, paused, split, completed) happens step by step,
/// the same way every time. What runs off the loop (the disk lanes, hooks) still runs on its own
/// threads; ``run()`` waits for it to report back.
extension Reactor {
    /// Makes the calling thread the loop's, for an embedded reactor (between a test's awaits, its
    /// next step may run on another thread of the pool). Returns whether the reactor is embedded.
    @discardableResult
    package func adoptCallingThread() -> Bool {
        guard isEmbedded else { return false }
        let now = UInt(pthread_self())
        guard loopThread.load(ordering: .acquiring) != now else { return true }
        loopThread.store(now, ordering: .releasing)
        lifecycle.withLock { $0.started = true }
        delegate?.reactorWillRun(self)
        return true
    }

    /// Runs one turn on the calling thread: every event ready now (or, `waiting`, the next one to
    /// become ready), every timer the manual clock has reached, then the delegate's end of turn.
    /// Returns how many callbacks ran; a turn that ran none found nothing ready.
    @discardableResult
    package func turn(waiting: Bool = false) -> Int {
        precondition(isEmbedded, "turn() drives an embedded reactor only")
        guard !lifecycle.withLock({ $0.stopped }) else { return 0 }
        adoptCallingThread()
        callbacksRun = 0
        event_base_loop(base, Int32(waiting ? EVLOOP_ONCE : EVLOOP_ONCE | EVLOOP_NONBLOCK))
        if clock.isManual { _ = fireDueTimers() }
        delegate?.reactorTurnDidEnd(self)
        let ran = callbacksRun
        if stopRequested { endLoop() }
        return ran
    }

    /// Runs turns until the loop is quiet: nothing ready, curl's timer not due within 50 ms, and
    /// nothing the delegate waits for off the loop (``ReactorDelegate/awaitsWorkOffLoop``); timers
    /// in the manual clock's future stay armed. Off-loop work is waited for (its report wakes the
    /// loop), for at most `limit` of real time.
    ///
    /// - Returns: `false` when the limit passed first (something is stuck: a test fails on it).
    @discardableResult
    package func run(limit: Duration = .seconds(60)) -> Bool {
        let deadline = DispatchTime.now().uptimeNanoseconds + limit.nanoseconds
        var idleTurns = 0
        while !lifecycle.withLock({ $0.stopped }) {
            if turn() > 0 {
                idleTurns = 0
                continue
            }
            // A turn's end may have queued work for the next (an admission adds a request to curl,
            // which sets a 0 ms timer): quiet only after two empty turns in a row.
            idleTurns += 1
            let curlSoon = curlTimerDue.map { $0 <= DispatchTime.now().uptimeNanoseconds + 50_000_000 } ?? false
            let offLoop = delegate?.awaitsWorkOffLoop ?? false
            if idleTurns >= 2 && !curlSoon && !offLoop { return true }
            if DispatchTime.now().uptimeNanoseconds >= deadline { return false }
            if curlSoon || offLoop { waitTurn(until: deadline) }
        }
        return true
    }

    /// Moves the manual clock by `duration`, stopping at each timer due on the way (its turn and
    /// what follows run before the clock moves on), then runs until quiet.
    ///
    /// - Returns: `false` when a run got stuck (see ``run(limit:)``).
    @discardableResult
    package func advance(by duration: Duration) -> Bool {
        precondition(clock.isManual, "advance(by:) moves a manual clock only")
        let target = clock.uptimeNanoseconds &+ duration.nanoseconds
        while let next = virtualTimers.map(\.due).min(), next <= target {
            clock.advance(toUptime: next)
            guard run() else { return false }
        }
        clock.advance(toUptime: target)
        return run()
    }

    /// One turn that waits for the next event, or until `deadline` (system uptime).
    private func waitTurn(until deadline: UInt64) {
        let now = DispatchTime.now().uptimeNanoseconds
        let wait = deadline > now ? deadline - now : 0
        let curlWait = curlTimerDue.map { $0 > now ? $0 - now : 0 } ?? wait
        var delay = Duration.nanoseconds(Int64(min(wait, curlWait))).timeval
        // A timer that only ends the wait: the turn then runs whatever else became ready.
        guard let limit = event_new(base, -1, 0, { _, _, _ in }, nil) else { return }
        event_add(limit, &delay)
        turn(waiting: true)
        event_del(limit)
        event_free(limit)
    }
}
