import HaulTransfer
import HaulValues
import Synchronization

/// What a download out of its slot (waiting to retry, paused) carries to its next attempt in this
/// process: the loop's own, kept by the ``PoolMachine`` from the transfer that left to the one
/// admitted next.
struct BetweenAttempts {
    /// Restarts from zero so far: a server that answers every resume from the wrong byte ends in
    /// `rangeNotHonored`, not in endless restarts.
    var restarts = 0
    /// What its handle counted (bytes, timings): a handle nobody kept is gone when the download runs
    /// again, and the new one goes on from these, so that its counts are the process's, not its
    /// last attempt's.
    var counts: (bytes: Int64, ledger: TimingLedger)?

    var isEmpty: Bool { restarts == 0 && counts == nil }
}

extension BetweenAttempts {
    /// What `transfer`'s next attempt starts from: its `restarts` from zero, and what its handle
    /// counted, for a handle nobody kept meanwhile.
    init(leaving transfer: Transfer, restarts: Int) {
        let download = transfer.handle
        self.restarts = restarts
        self.counts = (download.receivedBytes.load(ordering: .relaxed), download.ledger.withLock { $0 })
    }
}
