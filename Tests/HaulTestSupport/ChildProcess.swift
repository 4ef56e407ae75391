import Foundation
import Glibc

/// A child process started with `posix_spawn`, with a clean signal mask and default signal
/// handlers. (A child spawned from a Dispatch worker thread otherwise inherits its blocked signals:
/// nginx would ignore SIGTERM, and `haul` SIGINT.)
final class ChildProcess: @unchecked Sendable {
    // @unchecked Sendable: `pid` is immutable; `status` is written by `wait()` under `lock`.
    let pid: pid_t
    private let lock = NSLock()
    private var status: Int32?
    /// Its entry in the ``Watchdog`` until it is reaped (none for the watchdog's own gdb).
    private var watched: Int?

    /// Starts `path` with `arguments`; its stdout and stderr go to the given files (or /dev/null).
    /// Starts `path`. `environment`: variables set for it over this process's, whose proxy
    /// variables it never inherits when given (a test says which proxy it means).
    init(
        _ path: String,
        _ arguments: [String],
        stdout: String? = nil,
        stderr: String? = nil,
        environment: [String: String]? = nil,
        watched: Bool = true
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        var variables: [UnsafeMutablePointer<CChar>?]?
        if let environment {
            let proxyNames: Set = ["http_proxy", "https_proxy", "all_proxy", "no_proxy"]
            var merged = ProcessInfo.processInfo.environment.filter { !proxyNames.contains($0.key.lowercased()) }
            merged.merge(environment) { $1 }
            variables = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        }
        defer { variables?.forEach { free($0) } }
        let result =
            variables.map { posix_spawn(&pid, path, &actions, &attributes, argv, $0) }
            ?? posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        guard result == 0 else { throw TestFailure("could not start \(path): \(String(cString: strerror(result)))") }
        self.pid = pid
        if watched {
            let name = (path as NSString).lastPathComponent
            self.watched = Watchdog.shared.started("process \(name)", pid: pid) { [weak self] in
                self?.isRunning ?? false
            }
        }
    }

    /// Records the exit status (under `lock`): the process is no longer the watchdog's.
    private func reaped(_ raw: Int32) {
        status = raw
        if let watched { Watchdog.shared.stopped(watched) }
    }

    /// Sends a signal.
    func signal(_ number: Int32) {
        kill(pid, number)
    }

    /// Whether the process has not exited yet (reaps it if it has).
    var isRunning: Bool {
        lock.withLock {
            if status != nil { return false }
            var raw: Int32 = 0
            if waitpid(pid, &raw, WNOHANG) == pid {
                reaped(raw)
                return false
            }
            return true
        }
    }

    /// ``wait()`` on a thread of its own. Swift concurrency has as many shared threads as cores (two
    /// here): two tests blocked in `waitpid` on them stalled every other test of the run, by up to
    /// 14 s, which broke the timing bounds of tests that had nothing to do with child processes.
    @discardableResult
    func exited() async -> Int32 {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.wait()) }.start()
        }
    }

    /// Waits for the exit; returns the exit status, or 128 + the signal that ended it. Blocks the
    /// calling thread: from an async test, use ``exited()``.
    @discardableResult
    func wait() -> Int32 {
        lock.withLock {
            if status == nil {
                var raw: Int32 = 0
                while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
                reaped(raw)
            }
            let raw = status!
            let signal = raw & 0x7f
            return signal == 0 ? (raw >> 8) & 0xff : 128 + signal
        }
    }
}
