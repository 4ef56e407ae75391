import CHaul
import Glibc
import Synchronization

/// Waits until pipes have bytes or no writer, for the readers of ``DownloadStream``s: one thread of
/// its own blocked in an epoll set, each wait a one-shot watch of its descriptor, taken out of the
/// set before its waiter resumes (so that the reader may close the descriptor as soon as it is
/// woken).
///
/// Dispatch read sources did this before, one per wait: created and torn down thousands of times a
/// second from many threads, they hit libdispatch's use-after-free in its epoll bookkeeping on
/// Linux (swift-corelibs-libdispatch issue 949): the test suite crashed once in libdispatch's
/// manager thread (`_dispatch_event_loop_drain`, a bad pointer) while 100 streams ran at once.
package final class PipeReadiness: Sendable {
    package static let shared = PipeReadiness()

    private let epoll: Int32

    private enum Wait {
        /// Asked for, not registered yet.
        case pending
        /// Registered: resumed by an event or a cancellation, whichever comes first.
        case waiting(fd: Int32, CheckedContinuation<Void, Never>)
        /// Cancelled before it was registered: its registration resumes it at once.
        case cancelled
    }

    private struct Waits: ~Copyable {
        var byID: [Int: Wait] = [:]
        /// The ids waiting on each descriptor (several readers may share one stream).
        var byFD: [Int32: Set<Int>] = [:]
        var nextID = 0

        /// Takes every wait on `fd` out: their continuations.
        mutating func takeAll(on fd: Int32) -> [CheckedContinuation<Void, Never>] {
            guard let ids = byFD.removeValue(forKey: fd) else { return [] }
            return ids.compactMap { id in
                if case .waiting(_, let continuation) = byID.removeValue(forKey: id) { continuation } else { nil }
            }
        }
    }

    private let waits = Mutex(Waits())

    private init() {
        epoll = CHaul_epoll_create()
        guard epoll >= 0 else { return }
        var thread = pthread_t()
        let status = pthread_create(
            &thread,
            nil,
            { _ in
                PipeReadiness.shared.run()
                return nil
            },
            nil
        )
        if status == 0 { pthread_detach(thread) }
    }

    /// Returns once `fd` is readable (bytes, or no writer left), or the calling task is cancelled.
    /// Spurious returns are possible: the caller reads again.
    ///
    /// - Parameter registered: called once the wait is registered (for tests).
    package func waitUntilReadable(_ fd: Int32, registered: (@Sendable () -> Void)? = nil) async {
        guard epoll >= 0 else { return await Task.yield() }  // no epoll: the reader polls
        let id = waits.withLock { waits in
            waits.nextID += 1
            waits.byID[waits.nextID] = .pending
            return waits.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumesNow = waits.withLock { waits -> Bool in
                    guard case .pending = waits.byID[id] else {
                        waits.byID[id] = nil  // cancelled meanwhile
                        return true
                    }
                    guard CHaul_epoll_watch_once(epoll, fd) == 0 else {
                        waits.byID[id] = nil  // not watchable: the reader reads again
                        return true
                    }
                    waits.byID[id] = .waiting(fd: fd, continuation)
                    waits.byFD[fd, default: []].insert(id)
                    return false
                }
                registered?()
                if resumesNow { continuation.resume() }
            }
        } onCancel: {
            let continuation = waits.withLock { waits -> CheckedContinuation<Void, Never>? in
                switch waits.byID[id] {
                case .pending:
                    waits.byID[id] = .cancelled
                    return nil
                case .waiting(let fd, let continuation):
                    waits.byID[id] = nil
                    waits.byFD[fd]?.remove(id)
                    if waits.byFD[fd]?.isEmpty == true {
                        waits.byFD[fd] = nil
                        _ = CHaul_epoll_forget(epoll, fd)
                    }
                    return continuation
                case .cancelled, nil:
                    return nil
                }
            }
            continuation?.resume()
        }
    }

    /// The thread's loop: each ready descriptor is taken out of the set, then its waiters resume.
    private func run() {
        var ready = [Int32](repeating: -1, count: 64)
        while true {
            let count = ready.withUnsafeMutableBufferPointer { CHaul_epoll_ready(epoll, $0.baseAddress, 64) }
            guard count > 0 else { continue }  // EINTR
            var resumed: [CheckedContinuation<Void, Never>] = []
            waits.withLock { waits in
                for fd in ready.prefix(Int(count)) {
                    let taken = waits.takeAll(on: fd)
                    // A registration of this number, now or before (a wait cancelled, its
                    // descriptor closed and the number reused): out of the set while held.
                    _ = CHaul_epoll_forget(epoll, fd)
                    resumed += taken
                }
            }
            for continuation in resumed { continuation.resume() }
        }
    }
}
