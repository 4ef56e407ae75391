import Glibc
import Synchronization

/// Named moments at which a test makes the process die as a crash or a `kill -9` would, to check
/// what the next process finds (FoundationDB's and TiKV's failpoints, in one environment variable):
/// `HAUL_FAILPOINT=NAME` dies the first time NAME is reached, `NAME:N` the N-th time. Read once;
/// unset (always, outside tests), a point costs one load of a constant.
///
/// - `placed`: a finished file was moved into place, and its row does not say so yet.
package enum Failpoint {
    /// The armed point and at which time it fires, if any.
    private static let armed: (name: Substring, at: Int)? = {
        guard let value = getenv("HAUL_FAILPOINT").map({ String(cString: $0) }), !value.isEmpty else { return nil }
        let parts = value.split(separator: ":", maxSplits: 1)
        return (parts[0], parts.count > 1 ? max(1, Int(parts[1]) ?? 1) : 1)
    }()
    private static let reached = Atomic<Int>(0)

    /// Dies with SIGKILL when `name` is the armed point's and this is its time, after writing
    /// `detail` to standard error (what the test looks for afterwards).
    package static func reach(_ name: StaticString, _ detail: @autoclosure () -> String) {
        guard let armed, armed.name == "\(name)" else { return }
        guard reached.add(1, ordering: .relaxed).newValue == armed.at else { return }
        let line = "haul failpoint \(name): \(detail())\n"
        _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
        kill(getpid(), SIGKILL)
    }
}
