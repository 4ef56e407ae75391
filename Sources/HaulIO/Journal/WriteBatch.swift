import Glibc
import HaulValues
import Synchronization

/// Groups the loop thread's journal writes into one SQLite transaction per loop turn.
///
/// A download's life writes its row several times (admitted, head accepted, completed); with many
/// downloads finishing per turn, one commit per write was most of the journal's cost. A journal that
/// the loop thread writes to opens a transaction and the loop commits every open one when its turn
/// ends (``ReactorDelegate/reactorTurnDidEnd(_:)``). No other thread writes to a running manager's
/// journal (``JournalConfinement``); a journal of no running loop commits each write on its own.
///
/// A process killed in the middle of a turn loses that turn's rows: at worst a download runs again
/// from its partial file, which is what a resume trusts first anyway.
package final class WriteBatch: @unchecked Sendable {
    // @unchecked Sendable: `open` is touched only on the loop thread; `thread` is atomic.

    /// The loop thread (`pthread_t`), 0 until it attaches.
    private let thread = Atomic<UInt>(0)
    private var open: [Journal] = []
    private let placingsHandOff = Mutex<PlacingsHandOff?>(nil)

    /// Records a journal's placings for a disk lane (``placings``): returns once they are durable.
    package typealias PlacingsHandOff = @Sendable (Journal, [(DownloadID, String)]) throws(DownloadError) -> Void

    package init() {}

    /// How a disk lane has the loop record which files it is about to place
    /// (``Journal/recordPlacings(_:)``): in the loop's turn, the lane waiting for its commit. Set by
    /// the loop's owner before the loop runs; `nil`: the lane writes them itself.
    package var placings: PlacingsHandOff? {
        get { placingsHandOff.withLock { $0 } }
        set { placingsHandOff.withLock { $0 = newValue } }
    }

    /// Batches the calling thread's writes from now on. The loop thread calls it before it writes.
    package func attachCurrentThread() { thread.store(UInt(pthread_self()), ordering: .releasing) }

    /// Whether a thread attached (its loop runs).
    var hasThread: Bool { thread.load(ordering: .acquiring) != 0 }

    /// Whether the calling thread is the one whose writes are batched.
    var isBatchingThread: Bool {
        let thread = thread.load(ordering: .acquiring)
        return thread != 0 && pthread_equal(pthread_self(), pthread_t(thread)) != 0
    }

    /// A journal opened a transaction for this turn. Loop thread only.
    func opened(_ journal: Journal) { open.append(journal) }

    /// Commits every transaction the turn opened. Loop thread only.
    ///
    /// - Returns: the journals whose commit failed, with why.
    package func commit() -> [(Journal, DownloadError)] {
        guard !open.isEmpty else { return [] }
        let journals = open
        open.removeAll(keepingCapacity: true)
        var failures: [(Journal, DownloadError)] = []
        for journal in journals {
            do {
                try journal.commitBatch()
            } catch {
                failures.append((journal, error))
            }
        }
        return failures
    }
}
