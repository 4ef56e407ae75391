import Foundation
import Glibc

/// A TCP relay of the tests' own, on a free loopback port, in front of a real server (nginx): each
/// connection it accepts is relayed to the server, and a seeded draw decides how it misbehaves on
/// the way back to the client: it passes cleanly, or after a random number of bytes it resets the
/// connection (RST), cuts it (FIN), goes silent until the client gives up, or trickles the first
/// bytes. A thread relays each connection; ``stop()`` ends them all.
final class FaultRelay: @unchecked Sendable {
    // @unchecked Sendable: mutable state is guarded by `lock`; `listener`, `port` and `target` are
    // immutable.

    /// How a connection misbehaves.
    enum Fault: CaseIterable {
        case none, reset, cut, stall, trickle
    }

    let port: Int
    private let target: Int
    private let listener: Int32
    private let lock = NSLock()
    private var random: SeededRandom
    private var connections: Set<Int32> = []
    private var stopped = false
    /// Its entry in the ``Watchdog``, until ``stop()``.
    private var watched: Int?
    var isStopped: Bool { lock.withLock { stopped } }
    private var drawn: [Fault: Int] = [:]

    /// How many connections got each fault so far.
    var faults: [Fault: Int] { lock.withLock { drawn } }

    private init(listener: Int32, port: Int, target: Int, seed: UInt64) {
        self.listener = listener
        self.port = port
        self.target = target
        self.random = SeededRandom(seed: seed | 1)
    }

    /// Starts relaying 127.0.0.1:`port` (free, chosen here) to 127.0.0.1:`target`.
    static func start(to target: Int, seed: UInt64) throws -> FaultRelay {
        let (listener, port) = try Descriptors.loopbackListener()
        let relay = FaultRelay(listener: listener, port: port, target: target, seed: seed)
        relay.watched = Watchdog.shared.started("fault relay :\(port)") { [weak relay] in !(relay?.isStopped ?? true) }
        Thread { relay.acceptLoop() }.start()
        return relay
    }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)/\(path)")! }

    /// Stops accepting and ends every relayed connection.
    func stop() {
        lock.withLock {
            stopped = true
            if let watched { Watchdog.shared.stopped(watched) }
            for connection in connections { shutdown(connection, Int32(SHUT_RDWR)) }
        }
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }

    /// The next draw of the seeded generator. Call holding `lock`.
    private func next() -> UInt64 { random.next() }

    private func acceptLoop() {
        defer { close(listener) }
        while true {
            let client = Descriptors.acceptClosingOnExec(listener)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            // Half of the connections behave; the others share the four faults, each after up to
            // 96 KiB of the answer.
            let (fault, after, accepted) = lock.withLock { () -> (Fault, Int, Bool) in
                let draw = next()
                let fault: Fault = draw % 2 == 0 ? .none : [.reset, .cut, .stall, .trickle][Int((draw >> 1) % 4)]
                let after = Int((next() % (96 * 1024)))
                guard !stopped else { return (fault, after, false) }
                connections.insert(client)
                drawn[fault, default: 0] += 1
                return (fault, after, true)
            }
            guard accepted else {
                close(client)
                return
            }
            Thread { [self] in
                relay(client, fault: fault, after: after)
                lock.withLock { _ = connections.remove(client) }
                close(client)
            }.start()
        }
    }

    private func relay(_ client: Int32, fault: Fault, after: Int) {
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(server) }
        var address = Self.loopback(port: target)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var answered = 0  // bytes of the server's answers relayed to the client
        var fds = [
            pollfd(fd: client, events: Int16(POLLIN), revents: 0),
            pollfd(fd: server, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            guard poll(&fds, 2, 10_000) > 0 else { return }  // nothing for 10 s: the test is over
            if fds[0].revents != 0 {
                let count = read(client, &buffer, buffer.count)
                guard count > 0, send(server, buffer, count, Int32(MSG_NOSIGNAL)) == count else { return }
            }
            if fds[1].revents != 0 {
                var count = read(server, &buffer, buffer.count)
                guard count > 0 else { return }
                if fault == .trickle, answered < after {
                    // The first bytes slowly; the rest as they come.
                    guard trickle(buffer[0..<count], to: client) else { return }
                    answered += count
                    continue
                }
                if fault != .none, fault != .trickle, answered + count > after {
                    count = after - answered
                    if count > 0 { _ = send(client, buffer, count, Int32(MSG_NOSIGNAL)) }
                    switch fault {
                    case .reset:
                        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                        setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                    case .cut:
                        shutdown(client, Int32(SHUT_RDWR))
                    default:
                        // Silent until the client gives up (its stall timeout) or 5 s pass.
                        var quiet = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
                        _ = poll(&quiet, 1, 5_000)
                    }
                    return
                }
                guard send(client, buffer, count, Int32(MSG_NOSIGNAL)) == count else { return }
                answered += count
            }
        }
    }

    /// Sends `bytes` 512 at a time, 2 ms apart: whether the client took them all.
    private func trickle(_ bytes: ArraySlice<UInt8>, to client: Int32) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let count = min(512, bytes.endIndex - offset)
            let sent = bytes[offset..<(offset + count)].withUnsafeBytes {
                send(client, $0.baseAddress!, count, Int32(MSG_NOSIGNAL))
            }
            guard sent == count else { return false }
            offset += count
            usleep(2_000)
        }
        return true
    }
}
