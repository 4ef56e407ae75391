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
        let wanted = connectionsWanted
        connectionsWanted = [:]
        for (id, transfer) in wanted where transfers[id] === transfer {
            while transfer.wantsConnection, admission.mayOpenConnection(for: id, live: transfer.liveConnections) {
                guard transfer.openConnection() else { break }
                admission.setConnections(id, transfer.liveConnections)
            }
            admission.setConnections(id, transfer.liveConnections)
            if transfer.wantsConnection { connectionWaiters[id] = transfer }
        }
    }

    /// `transfer`'s connections may have changed: the counts follow, and transfers waiting for a
    /// connection ask again.
    func connectionsChanged(_ transfer: Transfer) {
        if transfers[transfer.id] === transfer {
            admission.setConnections(transfer.id, transfer.liveConnections)
            wantConnections(for: transfer)
        }
        guard !connectionWaiters.isEmpty else { return }
        for (id, waiter) in connectionWaiters {
            connectionWaiters[id] = nil
            if transfers[id] === waiter { wantConnections(for: waiter) }
        }
    }

    /// `transfer` gets connections at the end of this turn, if another one would have work.
    func wantConnections(for transfer: Transfer) {
        if transfer.wantsConnection { connectionsWanted[transfer.id] = transfer }
    }
}
