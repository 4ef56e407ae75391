import CHaul
import Glibc
import Synchronization

/// The reactor's socket watches (loop thread only), and what keeps a kept-alive connection's watch
/// armed between its requests.
///
/// curl stops watching a connection's socket when a request on it ends (`CURL_POLL_REMOVE`) and
/// watches it again when the next request on it starts, often a few turns later. Each time, libevent
/// took the socket out of epoll and put it back: two `epoll_ctl`s and libevent's books per small
/// download, about 3 % of the loop's time for 64 KiB bodies. A watch curl lets go of is *parked*
/// instead, still armed, until one of these:
/// - curl watches the same socket again: it gets the parked watch, and no system call is made when
///   it wants the same events;
/// - the socket is ready while parked (the server closed the idle connection, or sent what nobody
///   asked for): disarmed there, as curl learns of it only when it tries the connection again;
/// - curl closes the socket (`CURLOPT_CLOSESOCKETFUNCTION`, ``Reactor/closeSocketCallback``):
///   disarmed before the descriptor is closed, so that a socket opened later under the same number is
///   never taken for it (epoll forgets a closed descriptor; libevent would not);
/// - the loop ends.
///
/// Only network sockets are parked, and only when every easy handle on the reactor tells it of its
/// closes (``Reactor/init(logger:idleConnections:streamsPerConnection:parksSockets:)``): any other
/// socket curl watches (the threaded resolver's socket pair, closed without the callback) is disarmed
/// at once.
struct SocketWatches {
    /// Whether watches may be parked at all.
    let parks: Bool
    private var idle: [SocketWatch] = []
    private var parked: [curl_socket_t: SocketWatch] = [:]
    private static let idleLimit = 1024
    /// What happened to parked watches, for tests (atomic: read from other threads).
    let counts: Counts

    init(parks: Bool, counts: Counts) {
        self.parks = parks
        self.counts = counts
    }

    /// A watch for `socket`, which curl starts watching: its parked watch, armed as it was, or an idle
    /// or new one, disarmed.
    mutating func take(for socket: curl_socket_t) -> SocketWatch {
        if !parked.isEmpty, let watch = parked.removeValue(forKey: socket) {
            counts.reclaimed.add(1, ordering: .relaxed)
            return watch
        }
        let watch = idle.popLast() ?? SocketWatch()
        watch.parkable = parks && Self.isNetworkSocket(socket)
        return watch
    }

    /// curl stopped watching `socket` with `watch`: parked when it may be, else disarmed for reuse.
    mutating func release(_ watch: SocketWatch, of socket: curl_socket_t) {
        if watch.parkable, watch.armed, watch.socket == socket {
            parked[socket] = watch
            counts.parked.add(1, ordering: .relaxed)
        } else {
            watch.disarm()
            keepIdle(watch)
        }
    }

    /// `socket` was ready: if its watch is parked, it is disarmed, and `true` says that curl has nothing
    /// to do with it.
    mutating func unparkReady(_ socket: curl_socket_t) -> Bool {
        guard unpark(socket) else { return false }
        counts.disarmedWhenReady.add(1, ordering: .relaxed)
        return true
    }

    /// curl is about to close `socket`: its parked watch, if any, is disarmed first.
    mutating func socketWillClose(_ socket: curl_socket_t) {
        if unpark(socket) { counts.disarmedWhenClosed.add(1, ordering: .relaxed) }
    }

    /// Disarms every parked watch (the loop ends, before its event base goes).
    mutating func disarmParked() {
        for watch in parked.values { watch.disarm() }
        parked.removeAll()
    }

    private mutating func unpark(_ socket: curl_socket_t) -> Bool {
        guard !parked.isEmpty, let watch = parked.removeValue(forKey: socket) else { return false }
        watch.disarm()
        keepIdle(watch)
        return true
    }

    private mutating func keepIdle(_ watch: SocketWatch) {
        if idle.count < Self.idleLimit { idle.append(watch) }
    }

    /// Whether `socket` is an IPv4 or IPv6 socket (curl opens those through its open-socket callback
    /// and closes them through its close-socket callback).
    private static func isNetworkSocket(_ socket: curl_socket_t) -> Bool {
        var domain: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(socket, SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0 else { return false }
        return domain == AF_INET || domain == AF_INET6
    }

    /// Counts of what happened to parked watches since the reactor started.
    final class Counts: Sendable {
        let parked = Atomic<Int>(0)
        let reclaimed = Atomic<Int>(0)
        let disarmedWhenReady = Atomic<Int>(0)
        let disarmedWhenClosed = Atomic<Int>(0)
    }
}

extension Reactor {
    /// `CURLOPT_CLOSESOCKETFUNCTION` of every easy handle run on a reactor that parks sockets, with
    /// the reactor as its data (``callbackContext``): a parked watch of the socket is disarmed, and
    /// the reactor's owner told, before the socket is closed. curl calls it on the loop thread.
    package static let closeSocketCallback: curl_closesocket_callback = { context, socket in
        let reactor = Unmanaged<Reactor>.fromOpaque(context!).takeUnretainedValue()
        reactor.watches.socketWillClose(socket)
        reactor.delegate?.reactor(reactor, socketWillClose: socket)
        return close(socket)
    }

    /// curl opened `socket` for the request of the easy handle `easy` (``EasyHandle/openSocketCallback``):
    /// the reactor's owner is told, inside curl.
    func socketOpened(_ socket: curl_socket_t, for easy: UnsafeMutableRawPointer) {
        socketsOpened += 1
        delegate?.reactor(self, socketOpened: socket, for: easy)
    }

    /// Whether it parks kept-alive connections' watches: then every easy handle run on it must close
    /// its sockets through ``closeSocketCallback``.
    package var parksSockets: Bool { watches.parks }

    /// The reactor as curl's callbacks take it (not retained: the reactor outlives its multi handle).
    package var callbackContext: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// What happened to parked watches (``SocketWatches``) since the reactor started; any thread.
    package var parkedWatchCounts: (parked: Int, reclaimed: Int, disarmedWhenReady: Int, disarmedWhenClosed: Int) {
        let counts = watchCounts
        return (
            counts.parked.load(ordering: .relaxed), counts.reclaimed.load(ordering: .relaxed),
            counts.disarmedWhenReady.load(ordering: .relaxed), counts.disarmedWhenClosed.load(ordering: .relaxed)
        )
    }
}
