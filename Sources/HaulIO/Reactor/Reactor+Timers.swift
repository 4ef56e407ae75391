import CHaul
import Glibc

extension Reactor {
    /// Calls `handler` on the loop thread every `interval` until the loop ends. Loop thread only.
    package func repeatEvery(_ interval: Duration, _ handler: @escaping () -> Void) {
        guard let event = makeTimerEvent(persistent: true, handler) else { return }
        if clock.isManual {
            let every = interval.nanoseconds
            virtualTimers.append(VirtualTimer(event: event, due: clock.uptimeNanoseconds &+ every, interval: every))
            return
        }
        var delay = interval.timeval
        event_add(event, &delay)
    }

    /// A timer that fires `handler` once per ``arm(_:after:)``; arming again moves it. Loop thread only.
    package func makeOneShotTimer(_ handler: @escaping () -> Void) -> OpaquePointer? {
        makeTimerEvent(persistent: false, handler)
    }

    /// Sets the delegate's alarm to ring after `delay` (``ReactorDelegate/reactorAlarmRang(_:)``),
    /// replacing an earlier setting: one timer the loop's owner keeps no handle of. Loop thread only.
    package func setAlarm(after delay: Duration) {
        if alarm == nil {
            alarm = makeOneShotTimer { [unowned self] in delegate?.reactorAlarmRang(self) }
        }
        if let alarm { arm(alarm, after: delay) }
    }

    /// Sets a one-shot timer to fire after `delay` (replacing an earlier setting). Loop thread only.
    package func arm(_ timer: OpaquePointer, after delay: Duration) {
        if clock.isManual {
            virtualTimers.removeAll { $0.event == timer }
            let due = clock.uptimeNanoseconds &+ max(.zero, delay).nanoseconds
            virtualTimers.append(VirtualTimer(event: timer, due: due, interval: nil))
            return
        }
        var value = max(.zero, delay).timeval
        event_add(timer, &value)
    }

    private func makeTimerEvent(persistent: Bool, _ handler: @escaping () -> Void) -> OpaquePointer? {
        guard let (event, box) = makeEvent(-1, persistent ? CHaul_EV_PERSIST() : 0, handler) else { return nil }
        timers.append((event, box))
        return event
    }

    /// A libevent event on `descriptor` (-1: a timer) that calls `handler`, and the retained box that
    /// holds the handler (released by whoever frees the event).
    fileprivate func makeEvent(
        _ descriptor: Int32,
        _ flags: Int16,
        _ handler: @escaping () -> Void
    ) -> (OpaquePointer, UnsafeMutableRawPointer)? {
        let box = Unmanaged.passRetained(
            TimerBox { [unowned self] in
                callbacksRun &+= 1
                handler()
            }
        ).toOpaque()
        guard
            let event = event_new(
                base,
                descriptor,
                flags,
                { _, _, argument in
                    Unmanaged<TimerBox>.fromOpaque(argument!).takeUnretainedValue().handler()
                },
                box
            )
        else {
            Unmanaged<TimerBox>.fromOpaque(box).release()
            return nil
        }
        return (event, box)
    }
}

extension Reactor {
    /// A timer armed on a manual clock (``LoopClock``): it fires when a test moves the clock past
    /// `due` (``fireDueTimers()``); a repeating one is armed again `interval` later.
    struct VirtualTimer {
        let event: OpaquePointer
        var due: UInt64
        let interval: UInt64?
    }

    /// Runs every timer the manual clock has reached, earliest first (a repeating one as many times
    /// as its interval fits). Returns how many ran.
    func fireDueTimers() -> Int {
        var fired = 0
        while true {
            let now = clock.uptimeNanoseconds
            guard
                let index = virtualTimers.indices.filter({ virtualTimers[$0].due <= now })
                    .min(by: { virtualTimers[$0].due < virtualTimers[$1].due })
            else { return fired }
            let timer = virtualTimers[index]
            if let interval = timer.interval {
                virtualTimers[index].due &+= max(1, interval)
            } else {
                virtualTimers.remove(at: index)
            }
            guard let box = timers.first(where: { $0.0 == timer.event })?.1 else { continue }
            Unmanaged<TimerBox>.fromOpaque(box).takeUnretainedValue().handler()
            fired += 1
        }
    }
}

extension Reactor {
    /// A watch that calls its handler once, on the loop thread, each time it is armed and
    /// `descriptor` can be written (a stream destination whose reader fell behind). Loop thread
    /// only; ``DescriptorWatch/close()`` frees it.
    package func watchWritable(_ descriptor: Int32, _ handler: @escaping () -> Void) -> DescriptorWatch? {
        guard let (event, box) = makeEvent(descriptor, CHaul_EV_WRITE(), handler) else { return nil }
        return DescriptorWatch(event: event, box: box)
    }
}

/// See ``Reactor/watchWritable(_:_:)``. Loop thread only.
package final class DescriptorWatch {
    private var event: OpaquePointer?
    private let box: UnsafeMutableRawPointer

    fileprivate init(event: OpaquePointer, box: UnsafeMutableRawPointer) {
        self.event = event
        self.box = box
    }

    /// The handler runs once when the descriptor can be written.
    package func arm() {
        guard let event else { return }
        event_add(event, nil)
    }

    /// Stops and frees the watch.
    package func close() {
        guard let event else { return }
        event_del(event)
        event_free(event)
        self.event = nil
        Unmanaged<Reactor.TimerBox>.fromOpaque(box).release()
    }

    deinit { close() }
}
