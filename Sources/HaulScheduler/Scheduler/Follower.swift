import FoundationEssentials
import HaulIO
import HaulValues
import Logging

/// The looks at rows another manager runs (another process on the same state directory, mostly)
/// that this one was asked for: each followed row read in its journal, what the look finds decided
/// (``FollowDecision``) and carried out: an outcome published, progress shown, a row taken back as
/// this manager's. A job with no state of its own: the followed rows are the pool's
/// (``FollowedRows``), handed to each look, and what the scheduler does next is returned.
struct Follower {
    let catalog: Catalog
    let logger: Logger

    /// Looks at every row in `rows`, a journal at a time: a journal nothing was committed to since
    /// the last look, whose owners seen then all still run, is not read again (thousands of rows
    /// are not read five times a second while the other manager works on its own). Returns the
    /// directories whose queue gained a row taken back.
    func look(at rows: inout FollowedRows) -> Set<String> {
        let byDirectory = rows.byDirectory()
        var queued: Set<String> = []
        for (directory, ids) in byDirectory {
            guard let journal = catalog.openJournal(for: directory) else {
                for id in ids { rows.stop(id) }
                continue
            }
            journal.confined {
                let unchanged = rows.areUnchanged(
                    ids,
                    in: directory,
                    version: journal.dataVersion(),
                    isLive: { journal.isAnotherLiveOwner($0) }
                )
                if unchanged { return }
                for id in ids where look(at: id, in: journal, &rows) { queued.insert(directory) }
            }
        }
        rows.keepVersions(of: byDirectory.keys)
        return queued
    }

    /// Reads `id`'s row: ended → its outcome is published; still another live manager's → followed
    /// on; anything else (its manager gone, paused or failed there, or removed) → this manager's
    /// now, queued with the bytes it holds. Whether it was queued here.
    private func look(at id: DownloadID, in journal: Journal, _ rows: inout FollowedRows) -> Bool {
        guard let row = rows[id] else { return false }
        let standing: Journal.RowStanding?
        do {
            standing = try journal.standing(of: id)
        } catch {
            return false  // read again at the next look
        }
        let decision = FollowDecision.decide(
            standing,
            ownOwner: journal.owner,
            shownBytes: row.shownBytes,
            isAnotherLiveOwner: journal.isAnotherLiveOwner
        )
        switch decision {
        case .completed:
            rows.stop(id)
            guard let record = try? journal.storedRecord(for: id) else { return false }
            publishCompleted(id, record: record)
            return false
        case .ownRow:
            rows.stop(id)
            return false
        case .followOn(let owner, let progress):
            rows.saw(id, owner: owner, shownBytes: progress)
            guard let progress else { return false }
            catalog.existingHandle(id)?.hub.publish(
                .progress(DownloadProgress(bytesReceived: progress, totalBytes: standing?.totalBytes))
            )
            return false
        case .takeBack(let rowExists):
            rows.stop(id)
            let stored = rowExists ? try? journal.storedRecord(for: id) : nil
            return takeBack(id, stored: stored, requested: row.requested, in: journal)
        }
    }

    /// Queues `id` for this manager: its row as it stands (its manager gone, or paused or failed
    /// there), or, removed meanwhile (cancelled there, or failed before a byte), anew as requested.
    /// Whether it was queued.
    private func takeBack(_ id: DownloadID, stored: JournalRow?, requested: JournalRow, in journal: Journal) -> Bool {
        var record: JournalRow
        if let stored {
            record = stored
            record.takeRequest(of: requested)
            record.apply(.interrupted)  // a gone owner's queued or running row; others it leaves
            guard record.apply(.requested(sequence: catalog.nextQueueSequence())) == .moves(to: .queued) else {
                return false
            }
        } else {
            record = requested.restarted
            record.queueSequence = catalog.nextQueueSequence()
        }
        do {
            try journal.save(record, for: id)
        } catch {
            logger.warning(
                "could not take back a download another manager left",
                metadata: ["haul.url": "\(record.url)", "haul.error": "\(error)"]
            )
            return false
        }
        logger.debug(
            "takes over a download another manager left",
            metadata: ["haul.url": "\(record.url)", "haul.bytes": "\(record.bytesCommitted)"]
        )
        return true
    }

    /// Publishes a followed row's completion: on its handle, or on the manager's feed.
    private func publishCompleted(_ id: DownloadID, record: JournalRow) {
        let total = record.totalBytes ?? 0
        let events: [DownloadEvent] = [
            .progress(DownloadProgress(bytesReceived: total, totalBytes: total, estimatedTimeRemaining: .zero)),
            .completed(URL(fileURLWithPath: record.destination, isDirectory: false)),
        ]
        if let download = catalog.existingHandle(id), !download.hub.isClosed {
            for event in events { download.hub.publish(event) }
        } else if catalog.feed.hasSubscribers {
            for event in events {
                catalog.feed.publish(
                    FeedEvent(id: id, destinationPath: record.destination, event: event, download: nil)
                )
            }
        }
    }
}
