import Dispatch
import Glibc
import Haul
import Synchronization

/// SIGINT, SIGTERM and SIGHUP (a closed terminal): stop (a run pauses everything, its buffered bytes
/// written; a worker cancels its work, which pauses and gives its rows back), then let the command
/// end with 130, 143 or 129. A second signal exits at once. A signal ignored when
/// `haul` started stays ignored: a shell starts background jobs with SIGINT ignored, so that Ctrl-C
/// at the prompt does not reach them (`nohup` does the same for SIGHUP), as curl and wget respect.
final class Interruption: @unchecked Sendable {
    // @unchecked Sendable: `sources` is written once in `install()` before any signal can arrive;
    // `signal` is guarded by its mutex.
    private let stop: @Sendable () -> Void
    private var sources: [DispatchSourceSignal] = []
    /// What stopped the run first: a signal's number, or `--max-time` (``expire()``).
    private enum Cause { case signal(Int32), timeLimit }
    private let cause = Mutex<Cause?>(nil)

    /// `stop` runs at the first signal.
    init(stop: @escaping @Sendable () -> Void) {
        self.stop = stop
    }

    /// A run's: the first signal shuts the manager down (every download pauses).
    convenience init(manager: DownloadManager) {
        self.init { Task { await manager.shutdown() } }
    }

    /// The signal that stopped the run, if one did.
    var received: Int32? {
        if case .signal(let number)? = cause.withLock({ $0 }) { number } else { nil }
    }
    /// Whether a signal or the time limit stopped the run.
    var isStopped: Bool { cause.withLock { $0 != nil } }
    /// Whether `--max-time` stopped the run.
    var reachedTimeLimit: Bool {
        if case .timeLimit? = cause.withLock({ $0 }) { true } else { false }
    }

    /// `--max-time` is up: the run stops as at a first signal (a signal after it exits at once).
    func expire() {
        let first = cause.withLock { cause -> Bool in
            guard cause == nil else { return false }
            cause = .timeLimit
            return true
        }
        if first { stop() }
    }

    /// Whether `number` is ignored (as the parent left it, before ``install()``).
    static func isIgnored(_ number: Int32) -> Bool {
        var action = sigaction()
        guard sigaction(number, nil, &action) == 0 else { return false }
        return unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self)
            == unsafeBitCast(SIG_IGN, to: Int.self)
    }

    func install() {
        for number in [SIGINT, SIGTERM, SIGHUP] where !Self.isIgnored(number) {
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in
                let first = cause.withLock { cause -> Bool in
                    guard cause == nil else { return false }
                    cause = .signal(number)
                    return true
                }
                guard first else { exit(128 + number) }
                stop()
            }
            source.resume()
            sources.append(source)
        }
    }
}
