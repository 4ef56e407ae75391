import HaulIO
import HaulTransfer
import HaulValues
import Logging

/// What ``Callers`` asks of the scheduler that owns it: the transfers that run here, and the pool.
protocol ControlledPool: AnyObject {
    /// The transfer admitted as `id`, if the download runs here now.
    func running(_ id: DownloadID) -> Transfer?
    /// Performs what `transfer` handed back (``Transfer/apply(_:)``; `nil`: the input was not for
    /// it now).
    func perform(_ action: SlotAction?, for transfer: Transfer)
    /// The download ended: nothing is kept of it (here too: ``Callers/forget(_:)``).
    func forget(_ id: DownloadID)
    /// A row of `directory`'s journal was queued: the queue is read at the turn's end.
    func queueChanged(in directory: String)
    /// The manager shuts down.
    var isShuttingDown: Bool { get }
    /// The downloads whose files are being placed (on a disk lane).
    var finishing: Set<DownloadID> { get }
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

/// The loop's side of the callers: the rows they ask for (written by ``RowWriter``) and what they
/// gave beyond them (``CallerGiven``, kept from the row's writing to the download's end, read when
/// the row is admitted), the application's hooks a transfer waits on (``CallerHooks``), and their
/// controls of downloads (pause, resume, cancel, a rate limit, a hand-over): a download that runs
/// here is told through its transfer, a followed one by the ``Follower`` kept here, and any other's
/// row alone changes (``RowControls``). A caller that awaits its control (``SettleWaiter``) is
/// answered at a turn's end, once the rows are committed and what it asked for holds
/// (``DownloadControl/holds(in:runsHere:syncPending:)``), or at once when nothing will change (its
/// row is another process's, the download had ended). Sees the scheduler that keeps it through
/// ``ControlledPool``. Loop thread only.
final class Callers {
    private unowned let pool: any ControlledPool
    private let catalog: Catalog
    private let environment: TransferEnvironment
    private let settings: SchedulerSettings
    /// Where the hooks' answers go, off the loop.
    private let inbox: CommandInbox<SchedulerCommand>
    private let rows: RowControls
    /// What callers gave beyond their downloads' rows (credentials, header values, streams,
    /// loggers, traces), by id.
    private var given = CallerGivenTable()
    /// Rows another manager runs that this one was asked for.
    let follower: Follower
    /// Callers awaiting a control, in the order they came.
    private var waiters: [SettleWaiter] = []
    /// Rows asked for in this wake, to be written together (``writeGatheredRows()``).
    private var gathered: [RowWrite] = []

    init(
        pool: any ControlledPool,
        catalog: Catalog,
        environment: TransferEnvironment,
        settings: SchedulerSettings,
        inbox: CommandInbox<SchedulerCommand>
    ) {
        self.pool = pool
        self.catalog = catalog
        self.environment = environment
        self.settings = settings
        self.inbox = inbox
        self.rows = RowControls(catalog: catalog, logger: settings.logger)
        self.follower = Follower(catalog: catalog, reactor: environment.reactor, logger: settings.logger)
        follower.queued = { [unowned pool] directories in
            for directory in directories { pool.queueChanged(in: directory) }
        }
    }

    // MARK: commands

    /// Takes `command` if it is the callers' (rows to write, controls, rows to follow, the hooks'
    /// answers): whether it was. Consecutive rows are gathered and written together, in their place
    /// among the other commands: before the next command that is not one, and at the wake's end
    /// (``writeGatheredRows()``).
    func take(_ command: SchedulerCommand) -> Bool {
        if case .writeRows(let write) = command {
            gathered.append(write)
            return true
        }
        writeGatheredRows()
        switch command {
        case .follow(let directory, let rows): follower.follow(rows, in: directory)
        case .control(let download, .pause): pause(download)
        case .control(let download, .resume): resume(download)
        case .control(let download, .cancel): cancel(download)
        case .control(let download, .limitRate(let rate)): limitRate(of: download, to: rate)
        case .control(let download, .handedOver): handedOver(download)
        case .settle(let download, let control, let answer): settle(download, control, answer: answer)
        case .headersArrived(let id, let transfer, let result): headersArrived(id, for: transfer, result)
        case .urlRefreshed(let id, let transfer, let result): urlRefreshed(id, for: transfer, result)
        default: return false
        }
        return true
    }

    /// Writes the rows gathered in this wake, if any (``writeRows(_:)``).
    func writeGatheredRows() {
        guard !gathered.isEmpty else { return }
        let writes = gathered
        gathered.removeAll()
        writeRows(writes)
    }

    // MARK: rows and what callers gave

    /// Writes the rows callers asked for in one wake (``RowWriter``), a journal at a time; what they
    /// give beyond the rows is kept before they are answered, and the queue looked at again.
    func writeRows(_ writes: [RowWrite]) {
        guard !pool.isShuttingDown else {
            for write in writes { write.answer(DownloadError(code: .shutdown, url: nil)) }
            return
        }
        let writer = RowWriter(catalog: catalog)
        for (directory, writes) in RowWriter.byDirectory(writes) {
            guard let written = writer.write(writes, into: directory, given: given, finishing: pool.finishing)
            else { continue }
            for (id, entry) in written.changes { given.set(entry, for: id) }
            for (id, row) in written.asked { _ = tellRunning(id, .asked(row)) }
            written.answer(writes)
            if written.queued { pool.queueChanged(in: directory) }
            if !written.followed.isEmpty { follower.follow(written.followed, in: directory) }
        }
    }

    /// What a transfer of the claimed `record` is made from (``CallerGivenTable/request(for:record:rowID:)``).
    func request(for id: DownloadID, record: consuming JournalRow, rowID: Int64?) -> TransferRequest? {
        given.request(for: id, record: record, rowID: rowID)
    }

    /// `id` ended: nothing it gave is kept.
    func forget(_ id: DownloadID) { given.forget(id) }

    // MARK: the application's hooks (``CallerHooks``)

    /// `transfer` waits for its headers' values: the header provider is asked off the loop, and
    /// answers through the inbox; with no provider, the transfer fails at once.
    func askForHeaders(_ question: HeadersQuestion, for transfer: Transfer) {
        let (id, token, inbox) = (transfer.id, ObjectIdentifier(transfer), inbox)
        let failure = CallerHooks.askForHeaders(question, of: id, provider: settings.headerValues) {
            inbox.submit(.headersArrived(id, token, $0))
        }
        if let failure { pool.perform(transfer.apply(.headers(.failure(failure))), for: transfer) }
    }

    /// `transfer`'s URL was refused: the URL refresher is asked off the loop, and answers through
    /// the inbox; with no refresher, the transfer goes on as the refusal says.
    func askForFreshURL(_ question: FreshURLQuestion, for transfer: Transfer) {
        let (id, token, inbox) = (transfer.id, ObjectIdentifier(transfer), inbox)
        let asked = CallerHooks.askForFreshURL(question, of: id, refresher: settings.freshURL) {
            inbox.submit(.urlRefreshed(id, token, $0))
        }
        if !asked { pool.perform(transfer.apply(.urlRefused(nil)), for: transfer) }
    }

    /// The header provider answered: the transfer sends its first request, or fails. An answer for
    /// a transfer that is gone (paused, cancelled, shut down) is dropped.
    func headersArrived(
        _ id: DownloadID,
        for token: ObjectIdentifier,
        _ result: Result<[DownloadHeader], DownloadError>
    ) {
        guard let transfer = transfer(id, token: token), let action = transfer.apply(.headers(result)) else { return }
        if case .success(let headers) = result {
            // Kept for its retries and resumes in this process, as if it had been asked for with them.
            given.update(id) { $0.keep(headers: headers) }
        }
        pool.perform(action, for: transfer)
    }

    /// The URL refresher answered: the transfer moves to the fresh URL, or goes on as the failure
    /// that made it ask says. An answer for a transfer that is gone is dropped.
    func urlRefreshed(
        _ id: DownloadID,
        for token: ObjectIdentifier,
        _ result: Result<SchedulerSettings.FreshURL?, DownloadError>
    ) {
        guard let transfer = transfer(id, token: token) else { return }
        let (input, kept) = CallerHooks.input(for: result)
        guard let action = transfer.apply(input) else { return }
        if let kept {
            given.update(id) { entry in
                entry.url = kept.url
                if let headers = kept.headers { entry.keep(headers: headers) }
            }
        }
        pool.perform(action, for: transfer)
    }

    /// The transfer of `id` if it is still the one a hook's answer was asked for (`token`, its
    /// `ObjectIdentifier`).
    private func transfer(_ id: DownloadID, token: ObjectIdentifier) -> Transfer? {
        guard let transfer = pool.running(id), ObjectIdentifier(transfer) == token else { return nil }
        return transfer
    }

    // MARK: controls

    /// Tells the transfer that runs download `id` here `input`, and has what it hands back performed:
    /// whether one runs.
    private func tellRunning(_ id: DownloadID, _ input: TransferInput) -> Bool {
        guard let transfer = pool.running(id) else { return false }
        pool.perform(transfer.apply(input), for: transfer)
        return true
    }

    func pause(_ download: LiveDownload) {
        if tellRunning(download.id, pool.isShuttingDown ? .shutdown : .pause) { return }
        if follower.stop(download, cancelled: false) { return }
        // Queued, waiting or interrupted: only its row changes.
        rows.apply(.paused, to: download) { record in
            download.hub.publish(.paused(record.progress))
        }
    }

    func resume(_ download: LiveDownload) {
        if pool.running(download.id) != nil { return }  // admitted: it is not paused
        if follower.followIfAnothers(download) { return }
        rows.apply(.resumed(sequence: catalog.nextQueueSequence()), to: download) { _ in
            download.hub.publish(.queued)
        }
        pool.queueChanged(in: download.stateDirectoryPath)
    }

    /// A download's own rate limit: at once when it runs (and in its row, for later attempts).
    func limitRate(of download: LiveDownload, to rate: Int64?) {
        if tellRunning(download.id, .limitRate(rate)) { return }
        rows.setRateLimit(rate, of: download)
    }

    func cancel(_ download: LiveDownload) {
        if tellRunning(download.id, .cancel) { return }
        if follower.stop(download, cancelled: true) {
            pool.forget(download.id)
            return
        }
        rows.apply(.cancelled, to: download) { _ in
            // Its partial file is gone: a sync still running for it describes no bytes of its next one.
            environment.syncs.truncated(download.id)
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
    func beginShutdown() { follower.shutDown() }

    /// The manager stopped: every waiter is answered with the state its download is in.
    func answerEveryWaiter() {
        let waiting = waiters
        waiters.removeAll()
        for waiter in waiting { waiter.answer(waiter.handle.state) }
    }
}
