import HaulIO
import HaulTransfer
import HaulValues
import Synchronization

/// Makes the transfer of a row the admission claimed: the download's handle (the one its caller
/// holds, or a new one that goes on from what an earlier attempt's handle counted, when nobody kept
/// that one) and the transfer of the request the row and the caller's part make. A job with no
/// state: the scheduler hands it what it needs.
struct TransferMaker {
    let catalog: Catalog
    let environment: TransferEnvironment
    /// Where a new handle's controls go: the scheduler's inbox.
    let controller: any DownloadController

    /// The transfer of `request` (whose row `journal` holds, as `row` shows it), its handle found
    /// or made; `carried` is what the download's last attempt here left (``BetweenAttempts``).
    func make(
        _ request: consuming TransferRequest,
        of id: DownloadID,
        row: (destination: String, progress: DownloadProgress),
        in journal: Journal,
        carried: BetweenAttempts
    ) -> Transfer {
        let (download, isNew) = catalog.handle(id) {
            catalog.makeHandle(
                id,
                url: request.url,
                destinationPath: row.destination,
                stateDirectoryPath: journal.directory,
                progress: row.progress,
                controller: controller
            )
        }
        if let counts = carried.counts, isNew {
            // Nobody kept its handle while it was set aside: the new one goes on from the old one's.
            download.receivedBytes.store(counts.bytes, ordering: .relaxed)
            download.ledger.withLock { $0 = counts.ledger }
        }
        return Transfer(
            download: download,
            request: request,
            store: journal,
            environment: environment,
            restarts: carried.restarts
        )
    }
}
