import CHaul
import Dispatch
import Glibc
import HaulValues
import Logging
import Synchronization

/// One libevent `event_base` on its own thread, driving one libcurl multi handle through the multi
/// socket API (`CURLMOPT_SOCKETFUNCTION`, `CURLMOPT_TIMERFUNCTION`, `curl_multi_socket_action`).
///
/// It knows nothing of downloads. Other threads talk to the loop through their own queue of commands
/// (``CommandInbox``), which calls ``wake()``: an eventfd wakes the loop, and the delegate drains the
/// queue (``ReactorDelegate/reactorWasWoken(_:)``).
package final class Reactor: @unchecked Sendable {
    // @unchecked Sendable: `base`, `multi`, the events and `delegate` are touched only on the loop
    // thread (after `start`, before `join`); cross-thread state is `lifecycle` (a Mutex) and the
    // eventfd, which any thread may write.

    let base: OpaquePointer
    /// The libcurl multi handle. Loop thread only.
    let multi: UnsafeMutableRawPointer
    private let timerEvent: OpaquePointer
    private let wakeEvent: OpaquePointer
    private let wakeFD: Int32
    /// The loop's time (``LoopClock``): the system's, or a test's.
    package let clock: LoopClock
    /// Driven by a test, one turn at a time on its own thread (``turn(waiting:)``), instead of by
    /// a loop thread of its own.
    package let isEmbedded: Bool

    struct Lifecycle {
        /// The loop thread was started (it cleans up the multi handle when it ends).
        var started = false
        var stopped = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Taken by the one caller that joins the thread.
        var joinable: pthread_t?
    }
    let lifecycle = Mutex(Lifecycle())
    /// The loop thread's `pthread_t`, set on it before its first turn (0 before).
    let loopThread = Atomic<UInt>(0)

    /// How many sockets curl opened through ``EasyHandle/openSocketCallback`` so far: the order of
    /// each (the latest's is this count), so that an answer can say which sockets came before it.
    package internal(set) var socketsOpened: UInt64 = 0
    /// Strong on purpose: the loop keeps its delegate alive until it ends (a manager dropped without
    /// `shutdown()` still gets its shutdown processed); `runLoop` lets go of it at the end.
    package var delegate: (any ReactorDelegate)?
    private let logger: Logger

    /// Sets up the event base and the multi handle; the loop starts with ``start()``. `parksSockets`:
    /// every easy handle run on it tells it of the sockets curl closes (``closeSocketCallback``), so
    /// that a kept-alive connection's watch may stay armed between requests (``SocketWatches``).
    package init(
        logger: Logger,
        idleConnections: Int,
        streamsPerConnection: Int = 100,
        parksSockets: Bool = false,
        clock: LoopClock = .system,
        embedded: Bool = false
    ) throws(DownloadError) {
        self.logger = logger
        self.clock = clock
        self.isEmbedded = embedded
        self.watches = SocketWatches(parks: parksSockets, counts: watchCounts)
        Reactor.initializeCurl()
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

    // MARK: thread

    /// Starts the loop thread.
    package func start() throws(DownloadError) {
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
    var stopRequested = false

    private func runLoop() {
        loopThread.store(UInt(pthread_self()), ordering: .releasing)
        // Named for gdb, top -H and ps -L (and the tests' check that no loop outlives its manager).
        _ = CHaul_name_this_thread("haul-loop")
        delegate?.reactorWillRun(self)
        // One turn at a time (every ready event, then the delegate's end of turn), until `stop()`.
        while !stopRequested {
            if event_base_loop(base, Int32(EVLOOP_ONCE)) < 0 {
                logger.critical("the event loop failed")
                break
            }
            delegate?.reactorTurnDidEnd(self)
        }
        endLoop()
    }

    /// After the last turn: the loop was broken by `stop()`. Any transfer still in the multi handle
    /// was removed by the delegate; curl is cleaned up while still on the loop's thread.
    func endLoop() {
        curl_multi_cleanup(multi)
        watches.disarmParked()
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
    package func waitUntilStopped() async {
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
    package func join() {
        let joinable = lifecycle.withLock { lifecycle in
            defer { lifecycle.joinable = nil }
            return lifecycle.joinable
        }
        if let joinable { pthread_join(joinable, nil) }
    }

    final class TimerBox {
        let handler: () -> Void
        init(_ handler: @escaping () -> Void) { self.handler = handler }
    }
    /// Every timer made, freed when the loop ends.
    var timers: [(OpaquePointer, UnsafeMutableRawPointer)] = []
    /// The timers armed on a manual clock (``LoopClock``), which fire when a test moves it.
    var virtualTimers: [VirtualTimer] = []
    /// The delegate's alarm (``setAlarm(after:)``), made when first set.
    var alarm: OpaquePointer?
    /// Callbacks run in the current turn (sockets, curl's timer, wakes, timers): a turn that ran
    /// none found nothing ready.
    var callbacksRun = 0
    /// When curl's own timer is due (system uptime), for an embedded loop; `nil` when unset.
    var curlTimerDue: UInt64?

    /// Lets the loop thread end on its own (for a manager dropped without `shutdown()`).
    package func detach() {
        let joinable = lifecycle.withLock { lifecycle in
            defer { lifecycle.joinable = nil }
            return lifecycle.joinable
        }
        if let joinable { pthread_detach(joinable) }
    }

    /// Ends the loop after the current callback returns. Loop thread only.
    package func stop() {
        stopRequested = true
        event_base_loopbreak(base)
    }

    // MARK: waking

    /// Wakes the loop thread, which then calls ``ReactorDelegate/reactorWasWoken(_:)``. Any thread.
    func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, MemoryLayout<UInt64>.size)
    }

    private func woken() {
        callbacksRun &+= 1
        var counter: UInt64 = 0
        _ = read(wakeFD, &counter, MemoryLayout<UInt64>.size)
        delegate?.reactorWasWoken(self)
    }

    // MARK: curl multi

    /// Adds an easy handle to the multi handle. Loop thread only.
    package func add(_ easy: UnsafeMutableRawPointer) -> CURLMcode {
        assertOnLoop()
        return curl_multi_add_handle(multi, easy)
    }

    /// Removes an easy handle from the multi handle. Loop thread only.
    package func remove(_ easy: UnsafeMutableRawPointer) {
        assertOnLoop()
        curl_multi_remove_handle(multi, easy)
    }

    /// Whether the caller runs on this reactor's loop thread.
    var isOnLoop: Bool {
        let thread = loopThread.load(ordering: .acquiring)
        return thread != 0 && pthread_equal(pthread_t(thread), pthread_self()) != 0
    }

    /// Stops a debug build when loop-only code runs on another thread (as NIO's
    /// `preconditionInEventLoop`): the multi handle, the transfers and the scheduler's state are
    /// the loop's alone. Nothing in a release build.
    package func assertOnLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(isOnLoop, "loop-only code ran off the loop thread", file: file, line: line)
    }

    private func socketAction(_ socket: curl_socket_t, _ mask: Int32) {
        callbacksRun &+= 1
        var running: Int32 = 0
        let code = curl_multi_socket_action(multi, socket, mask, &running)
        if code != CURLM_OK && code != CURLM_BAD_SOCKET {
            // Nothing a caller did can cause this; report it and let transfers finish through
            // info_read below.
            logger.error(
                "curl_multi_socket_action failed",
                metadata: ["haul.code": "\(String(cString: curl_multi_strerror(code)))"]
            )
        }
        collectFinishedTransfers()
    }

    private func collectFinishedTransfers() {
        var easy: UnsafeMutableRawPointer?
        var result = CURLE_OK
        while CHaul_multi_info_read(multi, &easy, &result) != 0, let handle = easy {
            delegate?.reactor(self, requestDidEnd: handle, result: result)
            easy = nil
        }
    }

    /// The sockets' watches, idle and parked (loop thread only), and what happened to parked ones.
    var watches: SocketWatches
    let watchCounts = SocketWatches.Counts()

    private func updateSocket(_ socket: curl_socket_t, what: Int32, socketPointer: UnsafeMutableRawPointer?) {
        if what == CURL_POLL_REMOVE {
            if let socketPointer {
                watches.release(Unmanaged<SocketWatch>.fromOpaque(socketPointer).takeRetainedValue(), of: socket)
            }
            return
        }
        let watch: SocketWatch
        if let socketPointer {
            watch = Unmanaged<SocketWatch>.fromOpaque(socketPointer).takeUnretainedValue()
        } else {
            watch = watches.take(for: socket)
            curl_multi_assign(multi, socket, Unmanaged.passRetained(watch).toOpaque())
        }
        var flags = CHaul_EV_PERSIST()
        if what & CURL_POLL_IN != 0 { flags |= CHaul_EV_READ() }
        if what & CURL_POLL_OUT != 0 { flags |= CHaul_EV_WRITE() }
        watch.arm(
            base: base,
            socket: socket,
            flags: flags,
            callback: Reactor.socketReady,
            argument: Unmanaged.passUnretained(self).toOpaque()
        )
    }

    private func updateTimer(_ milliseconds: Int) {
        if milliseconds < 0 {
            event_del(timerEvent)
            curlTimerDue = nil
            return
        }
        if isEmbedded { curlTimerDue = DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000 }
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
        reactor.curlTimerDue = nil  // fired: curl sets it again if it wants another
        reactor.socketAction(-1, 0)  // CURL_SOCKET_TIMEOUT
    }

    static let socketReady: event_callback_fn = { socket, flags, argument in
        let reactor = Unmanaged<Reactor>.fromOpaque(argument!).takeUnretainedValue()
        var mask: Int32 = 0
        if flags & CHaul_EV_READ() != 0 { mask |= CURL_CSELECT_IN }
        if flags & CHaul_EV_WRITE() != 0 { mask |= CURL_CSELECT_OUT }
        // A parked watch (curl no longer watches the socket) is disarmed; curl is not told.
        if reactor.watches.unparkReady(socket) { return }
        reactor.socketAction(socket, mask)
    }

    private static let wakeFired: event_callback_fn = { _, _, argument in
        let reactor = Unmanaged<Reactor>.fromOpaque(argument!).takeUnretainedValue()
        reactor.woken()
    }
}
