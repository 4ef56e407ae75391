import Glibc
import Synchronization

/// One user of a journal at a time, by confinement rather than a lock: while its manager runs, a
/// journal is its loop's (callers' rows, every look at rows and the disk lanes' placings reach it
/// as commands the loop runs: ``WriteBatch``); before the loop starts, the thread that opens it;
/// after, the one that closes it. A standalone journal (a listing, a take-over's other journal) has
/// one user. So nothing on the loop's path waits or pays for a mutex.
///
/// A debug build checks the rule: two threads inside one journal at once stop the process, and a
/// running manager's journal counts the calls made off its loop (``Journal/offLoopEntries``,
/// which tests expect to stay 0). A release build does nothing here.
final class JournalConfinement: @unchecked Sendable {
    // @unchecked Sendable: `depth` is touched only by the thread that holds `holder`.
    #if DEBUG
        private let holder = Atomic<UInt>(0)
        private var depth = 0
        /// Calls made off the loop of a running manager (debug builds).
        let offLoop = Atomic<Int>(0)
    #endif

    init() {}

    /// The calling thread starts using the journal (again, when it already does).
    @inline(__always)
    func enter() {
        #if DEBUG
            let me = UInt(pthread_self())
            if holder.load(ordering: .acquiring) == me {
                depth += 1
                return
            }
            let (exchanged, found) = holder.compareExchange(expected: 0, desired: me, ordering: .acquiringAndReleasing)
            precondition(
                exchanged,
                "two threads used one journal at once (thread \(found) was in it): a running manager's journal is its loop's"
            )
            depth = 1
        #endif
    }

    /// The calling thread is done with the journal (once per ``enter()``).
    @inline(__always)
    func leave() {
        #if DEBUG
            depth -= 1
            if depth == 0 { holder.store(0, ordering: .releasing) }
        #endif
    }

    /// A running manager's journal was entered by a thread other than its loop (debug builds).
    @inline(__always)
    func noteOffLoop() {
        #if DEBUG
            offLoop.add(1, ordering: .relaxed)
        #endif
    }
}
