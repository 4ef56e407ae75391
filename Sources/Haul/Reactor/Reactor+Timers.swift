import CHaul
import Glibc

extension Reactor {
    /// Calls `handler` on the loop thread every `interval` until the loop ends. Loop thread only.
    func repeatEvery(_ interval: Duration, _ handler: @escaping () -> Void) {
        guard let event = makeTimerEvent(persistent: true, handler) else { return }
        var delay = interval.timeval
        event_add(event, &delay)
    }

    /// A timer that fires `handler` once per ``arm(_:after:)``; arming again moves it. Loop thread only.
    func makeOneShotTimer(_ handler: @escaping () -> Void) -> OpaquePointer? {
        makeTimerEvent(persistent: false, handler)
    }

    /// Sets a one-shot timer to fire after `delay` (replacing an earlier setting). Loop thread only.
    func arm(_ timer: OpaquePointer, after delay: Duration) {
        var value = max(.zero, delay).timeval
        event_add(timer, &value)
    }

    private func makeTimerEvent(persistent: Bool, _ handler: @escaping () -> Void) -> OpaquePointer? {
        let box = Unmanaged.passRetained(TimerBox(handler)).toOpaque()
        guard
            let event = event_new(
                base,
                -1,
                persistent ? CHaul_EV_PERSIST() : 0,
                { _, _, argument in
                    Unmanaged<TimerBox>.fromOpaque(argument!).takeUnretainedValue().handler()
                },
                box
            )
        else {
            Unmanaged<TimerBox>.fromOpaque(box).release()
            return nil
        }
        timers.append((event, box))
        return event
    }
}
