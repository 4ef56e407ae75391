import HaulIO
import HaulValues

/// A command for the ``Scheduler``, sent to the loop thread through its ``CommandInbox`` by a caller
/// on another thread (or by a disk lane).
package enum SchedulerCommand: Sendable {
    /// Rows were queued in the journal of this state directory.
    case queueChanged(String)
    /// Rows a caller asks for, to be written by the loop (its request whole, what its row does not
    /// hold kept by the loop), the caller answered once they are durable.
    case writeRows(RowWrite)
    /// A caller's look at what the loop holds (rows, handles), run in the loop's turn: the caller
    /// waits for what it found.
    case run(@Sendable () -> Void)
    /// Rows of this state directory's journal that another manager queued or runs were asked for:
    /// followed to their outcomes (their records as the requests found them).
    case follow(String, [DownloadID: JournalRow])
    /// A caller paused, resumed or cancelled a download.
    case control(LiveDownload, DownloadControl)
    /// A caller paused, resumed or cancelled a download and awaits the outcome (``Scheduler/settle(_:_:answer:)``).
    case settle(LiveDownload, DownloadControl, @Sendable (DownloadState) -> Void)
    /// Background disk work finished (syncs, finished files moved into place).
    case diskWorkDone([DiskResult])
    /// A disk lane is about to place these files: their rows say which file each is, in the turn's
    /// transaction; the lane is told once it commits (``Journal/recordPlacingsInTurn(_:answer:)``).
    case recordPlacings(Journal, [(DownloadID, String)], @Sendable (DownloadError?) -> Void)
    /// A header provider answered for a restored download's transfer (``ObjectIdentifier`` of it:
    /// a later transfer of the same download does not take an answer meant for an earlier one).
    case headersArrived(DownloadID, ObjectIdentifier, Result<[DownloadHeader], DownloadError>)
    /// The refresh hook answered for a transfer (as ``headersArrived``): a fresh URL, none, or an
    /// error in the hook's words.
    case urlRefreshed(DownloadID, ObjectIdentifier, Result<SchedulerSettings.FreshURL?, DownloadError>)
    /// The manager's rate limits change (``DownloadManager/setRateLimits(_:)``).
    case setRateLimits(RateLimits)
    /// A task waits until nothing is queued or running.
    case checkIdle
    /// Pause every download and stop the loop (the inbox accepts nothing more but disk reports).
    case shutdown
}

extension CommandInbox: DownloadController where Command == SchedulerCommand {
    package func submit(_ control: DownloadControl, for download: LiveDownload) {
        submit(.control(download, control))
    }

    package func settle(
        _ control: DownloadControl,
        for download: LiveDownload,
        answer: @escaping @Sendable (DownloadState) -> Void
    ) {
        // A manager shut down takes no command: nothing will change.
        if !submit(.settle(download, control, answer)) { answer(download.state) }
    }

    /// Asks the loop to shut down; the inbox takes no caller's command after this one.
    @discardableResult
    package func submitShutdown() -> Bool {
        submit(.shutdown, closing: true)
    }

    /// A disk lane's results: accepted after a shutdown too, which waits for them.
    func report(_ results: [DiskResult]) {
        submit(.diskWorkDone(results), evenWhenClosed: true)
    }

    /// A disk lane's files about to be placed, recorded by the loop in its turn: waits for the
    /// commit (accepted after a shutdown too, which waits for the lane's results).
    ///
    /// - Throws: why the rows could not be written: the files must not be placed.
    func recordPlacings(_ rows: [(DownloadID, String)], in journal: Journal) throws(DownloadError) {
        let reply = Reply<Bool>()
        let answer: @Sendable (DownloadError?) -> Void = { error in
            if error == nil { reply.set(true) }
            reply.answer(error)
        }
        submit(.recordPlacings(journal, rows, answer), evenWhenClosed: true)
        _ = try reply.wait()
    }
}
