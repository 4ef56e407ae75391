import CHaul
import FoundationEssentials
import HaulIO
import HaulValues

/// Rows another manager runs (another process on the same state directory, mostly) that this one
/// was asked for: followed to their outcome instead of fetched twice, and taken back when their
/// manager stops or is killed before it ends them.
extension Scheduler {
    /// How often followed rows are read again.
    static let followInterval = Duration.milliseconds(200)

    /// Follows `rows` (their records as the request found them) of `directory`'s journal.
    func follow(_ rows: [DownloadID: JournalRow], in directory: String) {
        guard !pool.isShuttingDown else { return }
        pool.following.follow(rows, in: directory)
        armFollowTimer()
    }

    private func armFollowTimer() {
        guard !pool.following.isEmpty else { return }
        if timers.follow == nil {
            timers.follow = reactor.makeOneShotTimer { [unowned self] in
                checkFollowed()
                armFollowTimer()
                admitAtTurnEnd()
            }
        }
        if let follow = timers.follow { reactor.arm(follow, after: Self.followInterval) }
    }

    /// Reads each followed row: ended → its outcome is published; still another live manager's →
    /// followed on; anything else (its manager gone, paused or failed there, or removed) → this
    /// manager's now, queued with the bytes it holds.
    func checkFollowed() {
        let byDirectory = pool.following.byDirectory()
        for (directory, ids) in byDirectory {
            guard let journal = catalog.openJournal(for: directory) else {
                for id in ids { pool.following.stop(id) }
                continue
            }
            journal.confined {
                // Nothing committed by another manager since the last look, and every owner seen
                // then still runs: every row stands as it stood (thousands of rows are not read
                // again five times a second while the other manager works on its own).
                let unchanged = pool.following.areUnchanged(
                    ids,
                    in: directory,
                    version: journal.dataVersion(),
                    isLive: { journal.isAnotherLiveOwner($0) }
                )
                if unchanged { return }
                for id in ids { check(id, in: journal) }
            }
        }
        pool.following.keepVersions(of: byDirectory.keys)
    }

    private func check(_ id: DownloadID, in journal: Journal) {
        guard let row = pool.following[id] else { return }
        let standing: Journal.RowStanding?
        do {
            standing = try journal.standing(of: id)
        } catch {
            return  // read again at the next look
        }
        let decision = FollowDecision.decide(
            standing,
            ownOwner: journal.owner,
            shownBytes: row.shownBytes,
            isAnotherLiveOwner: journal.isAnotherLiveOwner
        )
        switch decision {
        case .completed:
            pool.following.stop(id)
            guard let record = try? journal.storedRecord(for: id) else { return }
            publishCompleted(id, record: record, directory: journal.directory)
        case .ownRow:
            pool.following.stop(id)
        case .followOn(let owner, let progress):
            pool.following.saw(id, owner: owner, shownBytes: progress)
            guard let progress else { return }
            catalog.existingHandle(id)?.hub.publish(
                .progress(DownloadProgress(bytesReceived: progress, totalBytes: standing?.totalBytes))
            )
        case .takeBack(let rowExists):
            pool.following.stop(id)
            let stored = rowExists ? try? journal.storedRecord(for: id) : nil
            takeBack(id, stored: stored, requested: row.requested, in: journal)
        }
    }

    /// Queues `id` for this manager: its row as it stands (its manager gone, or paused or failed
    /// there), or, removed meanwhile (cancelled there, or failed before a byte), anew as requested.
    private func takeBack(_ id: DownloadID, stored: JournalRow?, requested: JournalRow, in journal: Journal) {
        var record: JournalRow
        if let stored {
            record = stored
            record.takeRequest(of: requested)
            record.apply(.interrupted)  // a gone owner's queued or running row; others it leaves
            guard record.apply(.requested(sequence: catalog.nextQueueSequence())) == .moves(to: .queued) else {
                return
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
            return
        }
        logger.debug(
            "takes over a download another manager left",
            metadata: ["haul.url": "\(record.url)", "haul.bytes": "\(record.bytesCommitted)"]
        )
        pool.queueChanged(in: journal.directory)
    }

    /// A followed download paused or cancelled by its caller: no longer followed (a paused one
    /// until it is resumed), its row left to the manager that runs it. Whether it was followed.
    func stopFollowing(_ download: LiveDownload, cancelled: Bool) -> Bool {
        if cancelled {
            guard pool.following.cancel(download.id) else { return false }
            forget(download.id)
            download.hub.publish(.cancelled)
        } else {
            guard pool.following.pause(download.id) else { return false }
            download.hub.publish(.paused(download.progress))
        }
        return true
    }

    /// Follows `download` again when it was followed before its caller paused it, or when another
    /// manager that runs holds its row: resumed here, it waits for that one's outcome (or takes the
    /// row back, as a followed one does). Whether it does.
    func followIfAnothers(_ download: LiveDownload) -> Bool {
        if let row = pool.following.takePaused(download.id) {
            download.hub.publish(.queued)
            follow([download.id: row.requested], in: row.directory)
            checkFollowed()
            return true
        }
        guard let journal = catalog.openJournal(for: download.stateDirectoryPath) else { return false }
        return journal.confined {
            guard let record = try? journal.record(for: download.id), journal.isOwnedByAnother(download.id)
            else { return false }
            if pool.following[download.id] == nil { download.hub.publish(.queued) }
            follow([download.id: record], in: journal.directory)
            return true
        }
    }

    /// Publishes a followed row's completion: on its handle, or on the manager's feed.
    private func publishCompleted(_ id: DownloadID, record: JournalRow, directory: String) {
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
