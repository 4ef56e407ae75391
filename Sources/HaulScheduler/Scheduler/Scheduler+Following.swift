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

    /// Looks at each followed row (``Follower``); a row taken back here queues its journal's.
    func checkFollowed() {
        let follower = Follower(catalog: catalog, logger: logger)
        let queued = follower.look(at: &pool.following)
        for directory in queued { pool.queueChanged(in: directory) }
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
}
