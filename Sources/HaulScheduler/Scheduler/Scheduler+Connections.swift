import CHaul
import FoundationEssentials
import Glibc
import HaulTransfer
import Logging
import Tracing

/// The connections of downloads fetched over several, granted at the end of a loop turn.
extension Scheduler {
    // MARK: connections

    /// Grants segmented transfers the connections they asked for this turn, as far as the per-host
    /// limit and the open-files budget allow (``Admission``); the ones still wanting ask again when a
    /// connection closes.
    func grantConnections() {
        for transfer in pool.takeConnectionsWanted() {
            let id = transfer.id
            transfer.openConnections { live in
                pool.setConnections(id, live)
                return pool.mayOpenConnection(for: id, live: live)
            }
            let (live, wantsMore) = transfer.connections
            pool.setConnections(id, live)
            if wantsMore { pool.waitForConnection(id) }
        }
    }

    /// `transfer`'s connections may have changed: the counts follow, and transfers waiting for a
    /// connection ask again.
    func connectionsChanged(_ transfer: Transfer) {
        if isCurrent(transfer) {
            // Read once: whether another would have work scans its segments.
            let (live, wantsMore) = transfer.connections
            pool.setConnections(transfer.id, live)
            if wantsMore { pool.wantConnections(transfer.id) }
        }
        for waiter in pool.takeConnectionWaiters() { wantConnections(for: waiter) }
    }

    /// `transfer` gets connections at the end of this turn, if another one would have work.
    func wantConnections(for transfer: Transfer) {
        if transfer.connections.wantsMore { pool.wantConnections(transfer.id) }
    }
}
