import HaulTransfer
import HaulValues

/// The connections of downloads fetched over several, granted at the end of a loop turn, as far as
/// the per-host limit and the open-files budget allow (``Admission``); the ones still wanting ask
/// again when a connection closes. A job with no state: handed the pool machine, whose members the
/// transfers are (they open their connections themselves, asking the pool before each).
enum ConnectionGranter {
    /// Grants segmented transfers the connections they asked for this turn.
    static func grant(_ pool: inout PoolMachine<Transfer>) {
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

    /// `transfer`'s connections may have changed: the counts follow (if it is still the one
    /// admitted), and transfers waiting for a connection ask again.
    static func changed(_ transfer: Transfer, _ pool: inout PoolMachine<Transfer>) {
        if pool.isCurrent(transfer, as: transfer.id) {
            // Read once: whether another would have work scans its segments.
            let (live, wantsMore) = transfer.connections
            pool.setConnections(transfer.id, live)
            if wantsMore { pool.wantConnections(transfer.id) }
        }
        for waiter in pool.takeConnectionWaiters() { want(for: waiter, &pool) }
    }

    /// `transfer` gets connections at the end of this turn, if another one would have work.
    static func want(for transfer: Transfer, _ pool: inout PoolMachine<Transfer>) {
        if transfer.connections.wantsMore { pool.wantConnections(transfer.id) }
    }
}
