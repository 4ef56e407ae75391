import HaulIO
import HaulTransfer
import HaulValues
import Logging
import Synchronization

/// Admits a queue head: claims its row, and makes its transfer: the download's handle (the one its
/// caller holds, or a new one that goes on from what an earlier attempt's handle counted, when
/// nobody kept that one) and the transfer of the request the row and the caller's part make, which
/// takes its slot in the pool machine. A job with no state: the scheduler hands it what it needs.
struct TransferMaker {
    let catalog: Catalog
    let environment: TransferEnvironment
    /// Where a new handle's controls go: the scheduler's inbox.
    let controller: any DownloadController
    let settings: SchedulerSettings

    /// What the scheduler does for a transfer admitted: tell it `input` (its first), and start the
    /// timers when it was the first admission.
    struct Admitted {
        let transfer: Transfer
        let input: TransferInput
        let startsTimers: Bool
    }

    /// Claims `head` of `journal` (its row marked running; `changes` is the journal's count of
    /// changed rows when the head was read, moved on by the claim: ``Journal/claim(_:unchangedSince:)``),
    /// makes its transfer from the row and what its caller gave (`callers`), and admits it into
    /// `pool`. `nil` when the row is no longer queued, when it cannot be claimed (the queue is left
    /// for now), or when it has no readable URL (it is removed).
    func admit(
        _ head: Journal.QueuedRow,
        from journal: Journal,
        unchangedSince changes: inout Int64,
        callers: Callers,
        into pool: inout PoolMachine<Transfer>
    ) -> Admitted? {
        let id = head.id
        let record: JournalRow
        do {
            // nil: no longer queued.
            guard let claimed = try journal.claim(head, unchangedSince: &changes) else { return nil }
            record = claimed
        } catch {
            settings.logger.error(
                "could not write the journal",
                metadata: ["haul.journal": "\(journal.path)", "haul.error": "\(error)"]
            )
            pool.queueDrained(in: journal.directory)
            return nil
        }
        let carried = pool.takeCarried(id)
        // What is needed of the row once it has gone whole into the request.
        let (rowURL, row, ownLimit) = (record.url, (record.destination, record.progress), record.maxBytesPerSecond)
        guard let request = callers.request(for: id, record: record, rowID: head.rowID) else {
            journal.remove(id)
            settings.logger.error(
                "a journal row has an unreadable URL",
                metadata: ["haul.journal": "\(journal.path)", "haul.url": "\(rowURL)"]
            )
            return nil
        }
        // What admission needs of the request, read before the request goes whole to its transfer.
        // Over https with HTTP/2 offered (the requests curl is told to wait to multiplex:
        // ``EasyHandle/configure``), its host's connections are granted (``ConnectionGrants``).
        let multiplexes = settings.streamsPerConnection != nil && EasyHandle.isHTTPS(request.url.absoluteString)
        let needsHeaders = request.needsHeaders
        let transfer = make(request, of: id, row: row, in: journal, carried: carried)
        let admitted = pool.admit(
            id,
            transfer,
            host: transfer.hostKey,
            directory: journal.directory,
            multiplexes: multiplexes,
            now: multiplexes ? environment.reactor.clock.uptimeNanoseconds : 0
        )
        environment.metrics.started.increment()
        environment.rateLimiter.admit(transfer, ownLimit: ownLimit)
        // Restored from the journal, which has header names only: never sent without their values.
        return Admitted(
            transfer: transfer,
            input: .admit(needsHeaders: needsHeaders, reportsAnswer: admitted.reportsAnswer),
            startsTimers: admitted.startsTimers
        )
    }

    /// The transfer of `request` (whose row `journal` holds, as `row` shows it), its handle found
    /// or made; `carried` is what the download's last attempt here left (``BetweenAttempts``).
    private func make(
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
