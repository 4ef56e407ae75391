import Foundation
import Glibc
import Testing

/// What the tests have running — every server and child process, from its start to its stop, with
/// the test that started it — watched (issue 75, items 2 and 3):
///
/// - A test whose first server or process started more than ``limit`` ago gets every thread's stack
///   written to a file (`gdb -p PID -batch -ex 'thread apply all bt'`, this process's and each
///   running `haul`'s), with the list of what runs for which test; the file's path is printed, and
///   `scripts/test.sh` prints the files at its end. So a stall is a finding, not a guess. At most
///   three per process (gdb stops the whole process while it reads it).
/// - When the process exits, one still running is a leak (a test that forgot its `stop`, a process
///   it never waited for), and so is a loop of Haul's (a thread named `haul-loop`: a manager not
///   shut down): each is named, and the process exits with status 1.
///
/// `HAUL_TEST_WATCHDOG_SECONDS` sets the limit (20 by default; 0: no watchdog); `scripts/test.sh`
/// gives the suites it runs alone, which take minutes by design, a limit of their own.
/// `HAUL_TEST_WATCHDOG_DIR` is where the files go (the temporary folder by default).
final class Watchdog: @unchecked Sendable {
    // @unchecked Sendable: everything mutable is touched under `lock`.
    static let shared = Watchdog()

    struct Entry {
        /// The test that started it ("?" when started outside one).
        let test: String
        /// What it is: "nginx", "fault server", "process haul", …
        let what: String
        /// A process's id, for its stack.
        let pid: pid_t?
        let since: ContinuousClock.Instant
        /// Whether it still runs (a process may have exited without being waited for).
        let isAlive: @Sendable () -> Bool
    }

    let limit: Duration?
    let folder: String
    private let lock = NSLock()
    private var entries: [Int: Entry] = [:]
    private var next = 0
    private var reported: Set<String> = []
    /// Tests that take longer by design, with their own limit (``expects(_:because:)``).
    private var longer: [String: Duration] = [:]
    private var dumps = 0

    private init() {
        let environment = ProcessInfo.processInfo.environment
        let seconds = environment["HAUL_TEST_WATCHDOG_SECONDS"].flatMap(Int.init) ?? 20
        limit = seconds > 0 ? .seconds(seconds) : nil
        folder = environment["HAUL_TEST_WATCHDOG_DIR"] ?? NSTemporaryDirectory()
        atexit { Watchdog.shared.checkForLeaks() }
        if limit != nil { Thread { Watchdog.shared.watch() }.start() }
    }

    /// The running test's name, with its suite's.
    static var currentTest: String {
        guard let test = Test.current else { return "?" }
        return
            "\(test.id.moduleName).\(test.id.nameComponents.joined(separator: "/")) (\"\(test.displayName ?? test.name)\")"
    }

    /// Registers what the current test started; pass the token to ``stopped(_:)`` when it stops.
    func started(_ what: String, pid: pid_t? = nil, isAlive: @escaping @Sendable () -> Bool) -> Int {
        let entry = Entry(test: Self.currentTest, what: what, pid: pid, since: .now, isAlive: isAlive)
        return lock.withLock {
            next += 1
            entries[next] = entry
            return next
        }
    }

    /// The current test takes up to `duration` by design (`reason`: what takes the time): the
    /// watchdog waits that long for it, not its usual limit, so that it stops the process to read
    /// its stacks only for a test that is late. Never shorter than the usual limit.
    func expects(_ duration: Duration, because reason: String) {
        let test = Self.currentTest
        lock.withLock { longer[test] = duration }
    }

    func stopped(_ token: Int) {
        _ = lock.withLock { entries.removeValue(forKey: token) }
    }

    // MARK: the watchdog

    private func watch() {
        guard let limit else { return }
        while true {
            Thread.sleep(forTimeInterval: 1)
            let now = ContinuousClock.now
            let (stalled, running): (String?, [Entry]) = lock.withLock {
                let running = Array(entries.values)
                guard dumps < 3 else { return (nil, running) }
                let oldest = Dictionary(grouping: running, by: \.test).mapValues { $0.map(\.since).min()! }
                guard
                    let test = oldest.filter({
                        now - $0.value > max(limit, longer[$0.key] ?? limit) && !reported.contains($0.key)
                    }).keys.sorted()
                        .first
                else { return (nil, running) }
                reported.insert(test)
                dumps += 1
                return (test, running)
            }
            if let stalled { dump(stalled: stalled, running: running, now: now) }
        }
    }

    /// Writes what runs, and every thread's stack of this process and of each `haul` running.
    private func dump(stalled: String, running: [Entry], now: ContinuousClock.Instant) {
        let allowed = lock.withLock { max(limit!, longer[stalled] ?? limit!) }
        let path = "\(folder)/haul-watchdog-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).txt"
        var text =
            "haul watchdog: \(stalled) has run for more than \(allowed) (the first of its servers or processes started then)\n\n"
        text += "Running now, by test:\n"
        for (test, items) in Dictionary(grouping: running, by: \.test).sorted(by: { $0.key < $1.key }) {
            text += "- \(test)\n"
            for item in items.sorted(by: { $0.since < $1.since }) {
                let age = now - item.since
                let seconds = Double(age.components.seconds) + Double(age.components.attoseconds) / 1e18
                text +=
                    "    \(item.what)\(item.pid.map { " (pid \($0))" } ?? ""), \(String(format: "%.1f", seconds)) s\n"
            }
        }
        let haulProcesses = running.filter { $0.what == "process haul" && $0.isAlive() }.compactMap(\.pid)
        for pid in [getpid()] + haulProcesses {
            text +=
                "\n\n===== every thread's stack of pid \(pid)\(pid == getpid() ? " (the test process)" : " (haul)") =====\n"
            text += Self.stacks(of: pid)
        }
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        FileHandle.standardError.write(
            Data("haul watchdog: \(stalled) has run for more than \(allowed); every thread's stack: \(path)\n".utf8)
        )
    }

    /// `gdb -p PID -batch -ex 'thread apply all bt'`, without gdb's notes on missing debug files.
    static func stacks(of pid: pid_t) -> String {
        guard access("/usr/bin/gdb", X_OK) == 0 else {
            return "(gdb is not installed: scripts/install-deps.sh installs it)\n"
        }
        let out = "\(NSTemporaryDirectory())haul-watchdog-gdb-\(UUID().uuidString)"
        defer { unlink(out) }
        let arguments = ["-p", "\(pid)", "-batch", "-iex", "set complaints 0", "-ex", "thread apply all bt"]
        guard let gdb = try? ChildProcess("/usr/bin/gdb", arguments, stdout: out, stderr: out, watched: false) else {
            return "(gdb did not start)\n"
        }
        let status = gdb.wait()
        let output = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        let kept = output.split(separator: "\n", omittingEmptySubsequences: false).filter {
            !$0.hasPrefix("[New LWP") && !$0.hasPrefix("warning: Section .debug_names")
                && !$0.hasPrefix("During symbol reading")
        }
        return demangled(kept.joined(separator: "\n")) + (status == 0 ? "" : "\n(gdb exited with \(status))\n")
    }

    /// Swift's symbols in `text` as `swift demangle --simplified` writes them (as they are, without it).
    static func demangled(_ text: String) -> String {
        let tool = "/opt/swift/usr/bin/swift-demangle"
        guard access(tool, X_OK) == 0 else { return text }
        let input = "\(NSTemporaryDirectory())haul-watchdog-in-\(UUID().uuidString)"
        let output = input + ".out"
        defer {
            unlink(input)
            unlink(output)
        }
        guard FileManager.default.createFile(atPath: input, contents: Data(text.utf8)),
            let process = try? ChildProcess(
                "/bin/sh",
                ["-c", "\(tool) --simplified < '\(input)'"],
                stdout: output,
                watched: false
            ),
            process.wait() == 0, let result = try? String(contentsOfFile: output, encoding: .utf8)
        else { return text }
        return result
    }

    // MARK: leaks

    /// At exit: what a test started and never stopped, and Haul's loops still running.
    private func checkForLeaks() {
        ServerStops.shared.waitForAll()
        // A manager's loop ends on its own thread after its shutdown returned: a moment's grace.
        var loops = Self.loopThreads()
        let deadline = ContinuousClock.now + .seconds(5)
        while loops > 0, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            loops = Self.loopThreads()
        }
        let left = lock.withLock { Array(entries.values) }.filter { $0.isAlive() }
        guard !left.isEmpty || loops > 0 else { return }
        var text = "haul tests: what tests started is still running as the process exits (a leak):\n"
        for entry in left.sorted(by: { $0.since < $1.since }) {
            text += "- \(entry.what)\(entry.pid.map { " (pid \($0))" } ?? ""), started by \(entry.test)\n"
        }
        if loops > 0 { text += "- \(loops) loop thread(s) of Haul (haul-loop): a manager that was not shut down\n" }
        FileHandle.standardError.write(Data(text.utf8))
        _exit(1)
    }

    /// The threads of this process named `haul-loop` (``Reactor``'s).
    static func loopThreads() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            let name = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
            return name.trimmingCharacters(in: .whitespacesAndNewlines) == "haul-loop"
        }.count
    }
}
