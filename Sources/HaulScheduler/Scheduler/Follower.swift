import CHaul
import FoundationEssentials
import HaulIO
import HaulValues
import Logging

/// The rows another manager runs (another process on the same state directory, mostly) that this
/// one was asked for: followed to their outcome instead of fetched twice, and taken back when their
/// manager stops or is killed before it ends them. Owns the rows it follows (``FollowedRows``) and
/// the timer of its looks: every ``interval``, each followed row is read in its journal, what the
/// look finds decided (``FollowDecision``) and carried out: an outcome published, progress shown, a
/// row taken back as this manager's, whose journal's queue it tells the scheduler of (`queued`).
/// Loop thread only.
final class Follower {
    /// How often followed rows are read again.
    static let interval = Duration.milliseconds(200)

    private let catalog: Catalog
    private let reactor: Reactor
    private let logger: Logger
    private var rows = FollowedRows()
    private var timer: OpaquePointer?
    /// The manager shut down: nothing is followed any more.
    private var isStopped = false
    /// Told after each look the directories whose queue gained a row taken back (maybe none): the
    /// scheduler reads them at the turn's end. Set once, by the scheduler that owns this.
    var queued: (Set<String>) -> Void = { _ in }

    init(catalog: Catalog, reactor: Reactor, logger: Logger) {
        self.catalog = catalog
        self.reactor = reactor
        self.logger = logger
    }

    /// Whether no row is followed (paused ones aside).
    var isEmpty: Bool { rows.isEmpty }

    /// Whether `id`'s row is followed.
    func isFollowing(_ id: DownloadID) -> Bool { rows[id] != nil }

    /// Follows `records` (their rows as the request found them) of `directory`'s journal.
    func follow(_ records: [DownloadID: JournalRow], in directory: String) {
        guard !isStopped else { return }
        rows.follow(records, in: directory)
        armTimer()
    }

    /// Follows nothing any more (the manager shuts down).
    func shutDown() {
        isStopped = true
        rows.removeAll()
    }

    private func armTimer() {
        guard !rows.isEmpty else { return }
        if timer == nil {
            timer = reactor.makeOneShotTimer { [unowned self] in
                lookNow()
                armTimer()
            }
        }
        if let timer { reactor.arm(timer, after: Self.interval) }
    }

    /// A followed download paused or cancelled by its caller: no longer followed (a paused one
    /// until it is resumed), its row left to the manager that runs it, its event published. Whether
    /// it was followed (a cancelled one is then to be forgotten).
    func stop(_ download: LiveDownload, cancelled: Bool) -> Bool {
        if cancelled {
            guard rows.cancel(download.id) else { return false }
            download.hub.publish(.cancelled)
        } else {
            guard rows.pause(download.id) else { return false }
            download.hub.publish(.paused(download.progress))
        }
        return true
    }

    /// Follows `download` again when it was followed before its caller paused it, or when another
    /// manager that runs holds its row: resumed here, it waits for that one's outcome (or takes the
    /// row back, as a followed one does). Whether it does.
    func followIfAnothers(_ download: LiveDownload) -> Bool {
        if let row = rows.takePaused(download.id) {
            download.hub.publish(.queued)
            follow([download.id: row.requested], in: row.directory)
            lookNow()
            return true
        }
        guard let journal = catalog.openLoopJournal(for: download.stateDirectoryPath) else { return false }
        return journal.confined {
            guard let record = try? journal.record(for: download.id), journal.isOwnedByAnother(download.id)
            else { return false }
            if rows[download.id] == nil { download.hub.publish(.queued) }
            follow([download.id: record], in: journal.directory)
            return true
        }
    }

    /// Looks at every followed row now, and tells the scheduler which queues gained one (`queued`).
    private func lookNow() { queued(look()) }

    /// Looks at every row in `rows`, a journal at a time: a journal nothing was committed to since
    /// the last look, whose owners seen then all still run, is not read again (thousands of rows
    /// are not read five times a second while the other manager works on its own). Returns the
    /// directories whose queue gained a row taken back.
    private func look() -> Set<String> {
        let byDirectory = rows.byDirectory()
        var queued: Set<String> = []
        for (directory, ids) in byDirectory {
            guard let journal = catalog.openLoopJournal(for: directory) else {
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
                for id in ids where look(at: id, in: journal) { queued.insert(directory) }
            }
        }
        rows.keepVersions(of: byDirectory.keys)
        return queued
    }

    /// Reads `id`'s row: ended → its outcome is published; still another live manager's → followed
    /// on; anything else (its manager gone, paused or failed there, or removed) → this manager's
    /// now, queued with the bytes it holds. Whether it was queued here.
    private func look(at id: DownloadID, in journal: Journal) -> Bool {
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
            // Checks its caller asked for that the manager which placed the file did not make: a
            // file that fails them is fetched anew here, as one asked for again after it completed.
            guard Self.passes(record, row.requested) else {
                return takeBack(id, stored: nil, requested: row.requested, in: journal)
            }
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

    /// Whether the file `record` says was placed passes the checks `requested` asks for that its
    /// manager did not make (it made its own, which may be these): a size by the length recorded,
    /// a checksum by the file's bytes, read here as for a completed download asked for again with one.
    static func passes(_ record: JournalRow, _ requested: JournalRow) -> Bool {
        if let size = requested.expectedSize, size != record.expectedSize,
            size != record.totalBytes ?? PlacedFile.at(record.destination)?.length
        {
            return false
        }
        guard let text = requested.expectedChecksum, text != record.expectedChecksum else { return true }
        guard let checksum = Checksum(text) else { return false }
        let digest = try? Checksum.digest(ofFileAt: record.destination, algorithm: checksum.algorithm)
        return digest == checksum.hex
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
