import HaulIO
import HaulTransfer
import HaulValues
import Logging

/// What ``Controls`` asks of the scheduler that owns it: the transfers that run here, and the pool.
protocol ControlledPool: AnyObject {
    /// The transfer admitted as `id`, if the download runs here now.
    func running(_ id: DownloadID) -> Transfer?
    /// Tells `transfer` `input`, and performs what it hands back.
    func tell(_ transfer: Transfer, _ input: TransferInput)
    /// The download ended: nothing is kept of it.
    func forget(_ id: DownloadID)
    /// A row of `directory`'s journal was queued: the queue is read at the turn's end.
    func queueChanged(in directory: String)
    /// The manager shuts down.
    var isShuttingDown: Bool { get }
}

/// A caller awaiting a control (`await download.pause()`, `resume()`, `cancel()`): answered with the
/// download's state once what it asked for holds, or at once when it cannot happen.
struct SettleWaiter {
    /// The download asked.
    let handle: LiveDownload
    let control: DownloadControl
    let answer: @Sendable (DownloadState) -> Void
}

extension DownloadControl {
    /// Whether what this control asks for holds for a download in `state`. `runsHere`: it is
    /// admitted here; `syncPending`: a sync of its partial file is still to report. A pause holds
    /// once it runs no more with its bytes synced and recorded, paused (or ended meanwhile); a
    /// cancel once it ended; the others at once.
    func holds(in state: DownloadState, runsHere: Bool, syncPending: Bool) -> Bool {
        switch self {
        case .pause:
            guard !runsHere, !syncPending else { return false }
            if case .paused = state { return true }
            return state.isFinal
        case .cancel:
            return state.isFinal
        case .resume, .limitRate, .handedOver:
            return true
        }
    }
}

/// A caller's controls of its downloads (pause, resume, cancel, a rate limit, a hand-over), carried
/// out on the loop: a download that runs here is told through its transfer, a followed one by the
/// ``Follower`` kept here, and any other's row alone changes (``RowControls``). A caller that awaits
/// its control (``SettleWaiter``) is answered at a turn's end, once the rows are committed and what
/// it asked for holds (``DownloadControl/holds(in:runsHere:syncPending:)``), or at once when
/// nothing will change (its row is another process's, the download had ended). Loop thread only.
final class Controls {
    private unowned let pool: any ControlledPool
    private let environment: TransferEnvironment
    private let rows: RowControls
    /// Rows another manager runs that this one was asked for.
    let follower: Follower
    /// Callers awaiting a control, in the order they came.
    private var waiters: [SettleWaiter] = []

    init(pool: any ControlledPool, catalog: Catalog, environment: TransferEnvironment, logger: Logger) {
        self.pool = pool
        self.environment = environment
        self.rows = RowControls(catalog: catalog, logger: logger)
        self.follower = Follower(catalog: catalog, reactor: environment.reactor, logger: logger)
        follower.queued = { [unowned pool] directories in
            for directory in directories { pool.queueChanged(in: directory) }
        }
    }

    func pause(_ download: LiveDownload) {
        if let transfer = pool.running(download.id) {
            pool.tell(transfer, pool.isShuttingDown ? .shutdown : .pause)
            return
        }
        if follower.stop(download, cancelled: false) { return }
        // Queued, waiting or interrupted: only its row changes.
        rows.apply(.paused, to: download) { record in
            download.hub.publish(.paused(record.progress))
        }
    }

    func resume(_ download: LiveDownload) {
        if pool.running(download.id) != nil { return }  // admitted: it is not paused
        if follower.followIfAnothers(download) { return }
        rows.apply(.resumed(sequence: rows.catalog.nextQueueSequence()), to: download) { _ in
            download.hub.publish(.queued)
        }
        pool.queueChanged(in: download.stateDirectoryPath)
    }

    /// A download's own rate limit: at once when it runs (and in its row, for later attempts).
    func limitRate(of download: LiveDownload, to rate: Int64?) {
        if let transfer = pool.running(download.id) {
            pool.tell(transfer, .limitRate(rate))
            return
        }
        rows.setRateLimit(rate, of: download)
    }

    func cancel(_ download: LiveDownload) {
        if let transfer = pool.running(download.id) {
            pool.tell(transfer, .cancel)
            return
        }
        if follower.stop(download, cancelled: true) {
            pool.forget(download.id)
            return
        }
        rows.apply(.cancelled, to: download) { _ in
            pool.forget(download.id)
            download.hub.publish(.cancelled)
        }
    }

    /// A paused download whose row another manager took (``DownloadManager/handOver(_:to:)``): it
    /// goes on there, and ends here as cancelled.
    func handedOver(_ download: LiveDownload) {
        guard pool.running(download.id) == nil else { return }  // asked for again meanwhile: it runs here
        pool.forget(download.id)
        download.hub.publish(.cancelled)
    }

    // MARK: awaited controls

    /// Carries `control` out as any, then answers its caller once what it asked for holds.
    func settle(
        _ download: LiveDownload,
        _ control: DownloadControl,
        answer: @escaping @Sendable (DownloadState) -> Void
    ) {
        switch control {
        case .pause: pause(download)
        case .resume: resume(download)
        case .cancel: cancel(download)
        case .limitRate, .handedOver:
            answer(download.state)
            return
        }
        let waiter = SettleWaiter(handle: download, control: control, answer: answer)
        let id = download.id
        // Nothing of it runs, is followed or is being synced here, and it is not what was asked
        // (its row is another process's, it had ended): nothing will change.
        if holds(waiter)
            || (pool.running(id) == nil && !follower.isFollowing(id) && !environment.syncs.isPending(id))
        {
            answer(download.state)
        } else {
            waiters.append(waiter)
        }
    }

    /// Whether what `waiter` asked for holds now.
    private func holds(_ waiter: SettleWaiter) -> Bool {
        let id = waiter.handle.id
        return waiter.control.holds(
            in: waiter.handle.state,
            runsHere: pool.running(id) != nil,
            syncPending: environment.syncs.isPending(id)
        )
    }

    /// At a turn's end, once its rows are committed: the waiters whose control holds are answered.
    func answerSettledWaiters() {
        guard !waiters.isEmpty else { return }
        let waiting = waiters
        waiters.removeAll()
        for waiter in waiting {
            if holds(waiter) { waiter.answer(waiter.handle.state) } else { waiters.append(waiter) }
        }
    }

    /// The manager shuts down: nothing is followed any more.
    func beginShutdown() { follower.stop() }

    /// The manager stopped: every waiter is answered with the state its download is in.
    func answerEveryWaiter() {
        let waiting = waiters
        waiters.removeAll()
        for waiter in waiting { waiter.answer(waiter.handle.state) }
    }
}
