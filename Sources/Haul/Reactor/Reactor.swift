import CHaul
import Glibc
import Logging
import Synchronization

/// What the reactor's owner does on the loop thread.
///
/// Every method is called on the loop thread, never inside a libcurl callback, so an
/// implementation may add and remove easy handles.
protocol ReactorDelegate: AnyObject {
    /// Commands that other threads submitted with ``Reactor/submit(_:)``, in submission order.
    func reactor(_ reactor: Reactor, handle commands: [ReactorCommand])
    /// libcurl finished a transfer (successfully or not). The handle is still in the multi handle.
    func reactor(_ reactor: Reactor, transferDidFinish easy: UnsafeMutableRawPointer, result: CURLcode)
    /// The loop thread starts; nothing else ran on it yet.
    func reactorWillRun(_ reactor: Reactor)
    /// The loop ran every event that was ready and is about to wait for more: the moment to write
    /// out what the turn's callbacks collected (journal rows, background work) in one go.
    func reactorTurnDidEnd(_ reactor: Reactor)
}

/// A command sent to the loop thread by a caller on another thread.
enum ReactorCommand: Sendable {
    /// Rows were queued in the journal of this state directory.
    case queueChanged(String)
    case pause(Download)
    case resume(Download)
    case cancel(Download)
    /// Background disk work finished (syncs, finished files moved into place).
    case diskWorkDone([DiskResult])
    /// A task waits until nothing is queued or running.
    case checkIdle
    case shutdown
}

/// One libevent `event_base` on its own thread, driving one libcurl multi handle through the multi
/// socket API (`CURLMOPT_SOCKETFUNCTION`, `CURLMOPT_TIMERFUNCTION`, `curl_multi_socket_action`).
///
/// Other threads talk to the loop only through ``submit(_:)``: the command goes on a locked queue and
/// an eventfd wakes the loop, which drains the queue and hands the commands to its delegate.
final class Reactor: @unchecked Sendable {
    // @unchecked Sendable: `base`, `multi`, the events and `delegate` are touched only on the loop
    // thread (after `start`, before `join`); cross-thread state is in `inbox` and `lifecycle`
    // (Mutexes).

    private let base: OpaquePointer
    /// The libcurl multi handle. Loop thread only.
    let multi: UnsafeMutableRawPointer
    private let timerEvent: OpaquePointer
    private let wakeEvent: OpaquePointer
    private let wakeFD: Int32

    private struct Inbox {
        var commands: [ReactorCommand] = []
        var wakePending = false
        var accepting = true
    }
    private let inbox = Mutex(Inbox())

    private struct Lifecycle {
        /// The loop thread was started (it cleans up the multi handle when it ends).
        var started = false
        var stopped = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Taken by the one caller that joins the thread.
        var joinable: pthread_t?
    }
    private let lifecycle = Mutex(Lifecycle())

    /// Strong on purpose: the loop keeps its delegate alive until it ends (a manager dropped without
    /// `shutdown()` still gets its shutdown processed); `runLoop` lets go of it at the end.
    var delegate: ReactorDelegate?
    private let logger: Logger

    /// Sets up the event base and the multi handle; the loop starts with ``start()``.
    init(logger: Logger, idleConnections: Int, streamsPerConnection: Int = 100) throws(DownloadError) {
        self.logger = logger
        Reactor.prepareProcess()
        guard let base = event_base_new() else {
            throw DownloadError(code: .internalError, url: nil, detail: "libevent could not create an event base")
        }
        guard let multi = curl_multi_init() else {
            event_base_free(base)
            throw DownloadError(code: .internalError, url: nil, detail: "libcurl could not create a multi handle")
        }
        let wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeFD >= 0 else {
            let code = errno
            curl_multi_cleanup(multi)
            event_base_free(base)
            throw DownloadError(code: .internalError, url: nil, errno: code, detail: "eventfd failed")
        }
        self.base = base
        self.multi = multi
        self.wakeFD = wakeFD
        // The events need `self` as their argument, so they are created with a placeholder and
        // re-assigned below once every stored property is initialised.
        self.timerEvent = event_new(base, -1, 0, nil, nil)
        self.wakeEvent = event_new(base, wakeFD, CHaul_EV_READ() | CHaul_EV_PERSIST(), nil, nil)

        let me = Unmanaged.passUnretained(self).toOpaque()
        event_assign(timerEvent, base, -1, 0, Reactor.timerFired, me)
        event_assign(wakeEvent, base, wakeFD, CHaul_EV_READ() | CHaul_EV_PERSIST(), Reactor.wakeFired, me)
        event_add(wakeEvent, nil)

        _ = CHaul_multi_setopt_socket_callback(multi, Reactor.socketCallback)
        _ = CHaul_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, me)
        _ = CHaul_multi_setopt_timer_callback(multi, Reactor.timerCallback)
        _ = CHaul_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, me)
        // The idle connection cache must hold one connection per admitted transfer, or connections
        // are closed and opened again between downloads to the same host.
        _ = CHaul_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, idleConnections)
        // Past this many HTTP/2 streams on a connection, curl opens another one (see
        // ``DownloadManager/Configuration/maxStreamsPerConnection``).
        _ = CHaul_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, streamsPerConnection)
    }

    deinit {
        // A reactor whose loop never ran (its manager failed to start: a locked journal) still owns
        // its multi handle, and with it curl's wake-up socket pair.
        if !lifecycle.withLock({ $0.started }) { curl_multi_cleanup(multi) }
        event_free(timerEvent)
        event_free(wakeEvent)
        close(wakeFD)
        event_base_free(base)
    }

    /// Process-wide set-up, run by the first call only: curl's global state, SIGPIPE ignored (curl is
    /// told `CURLOPT_NOSIGNAL`), and the open-files limit raised to its hard limit.
    static func prepareProcess() {
        initializeProcessOnce
    }

    private static let initializeProcessOnce: Void = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        signal(SIGPIPE, SIG_IGN)
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }()

    // MARK: thread

    /// Starts the loop thread.
    func start() throws(DownloadError) {
        let box = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(
            &thread,
            nil,
            { argument in
                let reactor = Unmanaged<Reactor>.fromOpaque(argument!).takeRetainedValue()
                reactor.runLoop()
                return nil
            },
            box
        )
        guard status == 0 else {
            Unmanaged<Reactor>.fromOpaque(box).release()
            throw DownloadError(
                code: .internalError,
                url: nil,
                errno: status,
                detail: "could not start the loop thread"
            )
        }
        lifecycle.withLock {
            $0.joinable = thread
            $0.started = true
        }
    }

    /// Set by ``stop()`` on the loop thread.
    private var stopRequested = false

    private func runLoop() {
        delegate?.reactorWillRun(self)
        // One turn at a time (every ready event, then the delegate's end of turn), until `stop()`.
        while !stopRequested {
            if event_base_loop(base, Int32(EVLOOP_ONCE)) < 0 {
                logger.critical("the event loop failed")
                break
            }
            delegate?.reactorTurnDidEnd(self)
        }
        // The loop was broken by `stop()`. Any transfer still in the multi handle was removed by the
        // delegate; clean up curl while still on this thread.
        curl_multi_cleanup(multi)
        for (event, box) in timers {
            event_free(event)
            Unmanaged<TimerBox>.fromOpaque(box).release()
        }
        timers = []
        delegate = nil
        let waiters = lifecycle.withLock { lifecycle in
            lifecycle.stopped = true
            defer { lifecycle.waiters = [] }
            return lifecycle.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the loop thread has left its loop and cleaned up curl.
    func waitUntilStopped() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let stopped = lifecycle.withLock { lifecycle in
                if !lifecycle.stopped { lifecycle.waiters.append(continuation) }
                return lifecycle.stopped
            }
            if stopped { continuation.resume() }
        }
    }

    /// Waits for the loop thread to end. Call after ``waitUntilStopped()``; any number of callers
    /// may call it, one of them joins.
    func join() {
        let joinable = lifecycle.withLock { lifecycle in
            defer { lifecycle.joinable = nil }
            return lifecycle.joinable
        }
        if let joinable { pthread_join(joinable, nil) }
    }

    /// Calls `handler` on the loop thread every `interval` until the loop ends. Loop thread only.
    func repeatEvery(_ interval: Duration, _ handler: @escaping () -> Void) {
        guard let event = makeTimerEvent(persistent: true, handler) else { return }
        var delay = Self.interval(interval)
        event_add(event, &delay)
    }

    /// A timer that fires `handler` once per ``arm(_:after:)``; arming again moves it. Loop thread only.
    func makeOneShotTimer(_ handler: @escaping () -> Void) -> OpaquePointer? {
        makeTimerEvent(persistent: false, handler)
    }

    /// Sets a one-shot timer to fire after `delay` (replacing an earlier setting). Loop thread only.
    func arm(_ timer: OpaquePointer, after delay: Duration) {
        var value = Self.interval(max(.zero, delay))
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

    private static func interval(_ duration: Duration) -> Glibc.timeval {
        let (seconds, attoseconds) = duration.components
        return Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }

    private final class TimerBox {
        let handler: () -> Void
        init(_ handler: @escaping () -> Void) { self.handler = handler }
    }
    /// Every timer made, freed when the loop ends.
    private var timers: [(OpaquePointer, UnsafeMutableRawPointer)] = []

    /// Lets the loop thread end on its own (for a manager dropped without `shutdown()`).
    func detach() {
        let joinable = lifecycle.withLock { lifecycle in
            defer { lifecycle.joinable = nil }
            return lifecycle.joinable
        }
        if let joinable { pthread_detach(joinable) }
    }

    /// Ends the loop after the current callback returns. Loop thread only.
    func stop() {
        stopRequested = true
        event_base_loopbreak(base)
    }

    // MARK: commands

    /// Queues a command for the loop thread and wakes it.
    ///
    /// - Returns: `false` when the reactor no longer accepts commands (it is shutting down).
    @discardableResult
    func submit(_ command: ReactorCommand) -> Bool {
        let shouldWake: Bool? = inbox.withLock { inbox in
            // Sync reports are Haul's own and must reach a loop that is shutting down (it waits for them).
            switch command {
            case .diskWorkDone: break
            default: guard inbox.accepting else { return nil }
            }
            if case .shutdown = command { inbox.accepting = false }
            inbox.commands.append(command)
            defer { inbox.wakePending = true }
            return !inbox.wakePending
        }
        guard let shouldWake else { return false }
        if shouldWake {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, MemoryLayout<UInt64>.size)
        }
        return true
    }

    private func drainInbox() {
        var counter: UInt64 = 0
        _ = read(wakeFD, &counter, MemoryLayout<UInt64>.size)
        let commands = inbox.withLock { inbox -> [ReactorCommand] in
            inbox.wakePending = false
            var taken: [ReactorCommand] = []
            swap(&taken, &inbox.commands)
            return taken
        }
        if !commands.isEmpty {
            delegate?.reactor(self, handle: commands)
        }
    }

    // MARK: curl multi

    /// Adds an easy handle to the multi handle. Loop thread only.
    func add(_ easy: UnsafeMutableRawPointer) -> CURLMcode {
        curl_multi_add_handle(multi, easy)
    }

    /// Removes an easy handle from the multi handle. Loop thread only.
    func remove(_ easy: UnsafeMutableRawPointer) {
        curl_multi_remove_handle(multi, easy)
    }

    private func socketAction(_ socket: curl_socket_t, _ mask: Int32) {
        var running: Int32 = 0
        let code = curl_multi_socket_action(multi, socket, mask, &running)
        if code != CURLM_OK && code != CURLM_BAD_SOCKET {
            // Nothing a caller did can cause this; report it and let transfers finish through
            // info_read below.
            logger.error(
                "curl_multi_socket_action failed",
                metadata: ["code": "\(String(cString: curl_multi_strerror(code)))"]
            )
        }
        collectFinishedTransfers()
    }

    private func collectFinishedTransfers() {
        var easy: UnsafeMutableRawPointer?
        var result = CURLE_OK
        while CHaul_multi_info_read(multi, &easy, &result) != 0, let handle = easy {
            delegate?.reactor(self, transferDidFinish: handle, result: result)
            easy = nil
        }
    }

    /// One per socket curl asks us to watch; its libevent `struct event` lives inside it and is
    /// re-assigned when curl changes the flags it wants.
    private final class SocketWatch {
        let event: OpaquePointer
        var armed = false

        init() {
            event = OpaquePointer(
                UnsafeMutableRawPointer.allocate(byteCount: event_get_struct_event_size(), alignment: 16)
            )
        }

        func arm(base: OpaquePointer, socket: curl_socket_t, flags: Int16, argument: UnsafeMutableRawPointer) {
            if armed { event_del(event) }
            event_assign(event, base, socket, flags, Reactor.socketReady, argument)
            event_add(event, nil)
            armed = true
        }

        deinit {
            if armed { event_del(event) }
            UnsafeMutableRawPointer(event).deallocate()
        }
    }

    private func updateSocket(_ socket: curl_socket_t, what: Int32, socketPointer: UnsafeMutableRawPointer?) {
        if what == CURL_POLL_REMOVE {
            if let socketPointer {
                Unmanaged<SocketWatch>.fromOpaque(socketPointer).release()
            }
            return
        }
        let watch: SocketWatch
        if let socketPointer {
            watch = Unmanaged<SocketWatch>.fromOpaque(socketPointer).takeUnretainedValue()
        } else {
            watch = SocketWatch()
            curl_multi_assign(multi, socket, Unmanaged.passRetained(watch).toOpaque())
        }
        var flags = CHaul_EV_PERSIST()
        if what & CURL_POLL_IN != 0 { flags |= CHaul_EV_READ() }
        if what & CURL_POLL_OUT != 0 { flags |= CHaul_EV_WRITE() }
        watch.arm(base: base, socket: socket, flags: flags, argument: Unmanaged.passUnretained(self).toOpaque())
    }

    private func updateTimer(_ milliseconds: Int) {
        if milliseconds < 0 {
            event_del(timerEvent)
            return
        }
        // A 0 ms timeout must not call back into curl from inside its callback: arm a 0 ms timer.
        var delay = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        event_add(timerEvent, &delay)
    }

    // MARK: C callbacks (non-capturing; `self` comes back through the user pointer)

    private static let socketCallback: curl_socket_callback = { _, socket, what, userPointer, socketPointer in
        let reactor = Unmanaged<Reactor>.fromOpaque(userPointer!).takeUnretainedValue()
        reactor.updateSocket(socket, what: what, socketPointer: socketPointer)
        return 0
    }

    private static let timerCallback: curl_multi_timer_callback = { _, milliseconds, userPointer in
        let reactor = Unmanaged<Reactor>.fromOpaque(userPointer!).takeUnretainedValue()
        reactor.updateTimer(milliseconds)
        return 0
    }

    private static let timerFired: event_callback_fn = { _, _, argument in
        let reactor = Unmanaged<Reactor>.fromOpaque(argument!).takeUnretainedValue()
        reactor.socketAction(-1, 0)  // CURL_SOCKET_TIMEOUT
    }

    private static let socketReady: event_callback_fn = { socket, flags, argument in
        let reactor = Unmanaged<Reactor>.fromOpaque(argument!).takeUnretainedValue()
        var mask: Int32 = 0
        if flags & CHaul_EV_READ() != 0 { mask |= CURL_CSELECT_IN }
        if flags & CHaul_EV_WRITE() != 0 { mask |= CURL_CSELECT_OUT }
        reactor.socketAction(socket, mask)
    }

    private static let wakeFired: event_callback_fn = { _, _, argument in
        let reactor = Unmanaged<Reactor>.fromOpaque(argument!).takeUnretainedValue()
        reactor.drainInbox()
    }
}
