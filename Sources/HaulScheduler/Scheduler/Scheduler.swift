import CHaul
import Dispatch
import FoundationEssentials
import Glibc
import HaulIO
import HaulTransfer
import HaulValues
import Logging
import Tracing

/// The loop thread's owner of every admitted download, an executor of the ``PoolMachine``'s
/// decisions: admits queue heads while slots are free, performs what transfers hand back that
/// reaches beyond them (slots, the queue, the disk lanes), and runs the loop's timers; the callers'
/// side is ``Callers``'. Its state is its own (private); its jobs are types handed what they need.
/// Every method runs on the loop thread (reactor callbacks, commands, finished transfers).
package final class Scheduler: ReactorDelegate, @unchecked Sendable {
    // @unchecked Sendable: created on the caller's thread, then used only on the loop thread; the
    // manager keeps a reference only to keep it alive.

    /// What transfers share: pools, limits, the loop.
    private let environment: TransferEnvironment
    /// What the queue and the scheduler share: open journals, live handles, the feed.
    private let catalog: Catalog
    /// Where callers' commands and the disk lanes' reports arrive.
    private let inbox: CommandInbox<SchedulerCommand>
    /// Syncs, checks and renames, off the loop thread.
    private let disk: DiskLanes
    /// Every decision about who runs (``PoolMachine``): the admitted transfers among it.
    private var pool: PoolMachine<Transfer>
    /// The loop's side of the callers: their rows, what they gave, their hooks and controls.
    private lazy var callers = Callers(
        pool: self,
        catalog: catalog,
        environment: environment,
        settings: settings,
        inbox: inbox
    )

    private var settings: SchedulerSettings { pool.settings }
    private var reactor: Reactor { environment.reactor }
    private var logger: Logger { settings.logger }

    package init(
        settings: SchedulerSettings,
        environment: TransferEnvironment,
        inbox: CommandInbox<SchedulerCommand>,
        catalog: Catalog
    ) {
        self.inbox = inbox
        self.disk = DiskLanes(report: { [inbox] results in inbox.report(results) })
        self.catalog = catalog
        self.pool = PoolMachine(settings: settings, firstRetryDelay: environment.retryPolicy.baseDelay.inSeconds)
        self.environment = environment
        catalog.writeBatch.placings = { [inbox] journal, rows throws(DownloadError) in
            try inbox.recordPlacings(rows, in: journal)
        }
    }

    // MARK: ReactorDelegate

    package func reactorWillRun(_ reactor: Reactor) {
        catalog.writeBatch.attachCurrentThread()
        catalog.feed.attachCurrentThread()
    }

    package func reactor(_ reactor: Reactor, socketOpened socket: curl_socket_t, for easy: UnsafeMutableRawPointer) {
        guard pool.admission.grants != nil, let transfer = Transfer.owning(easy) else { return }
        pool.socketOpened(socket, by: transfer.id, order: reactor.socketsOpened)
    }

    package func reactor(_ reactor: Reactor, socketWillClose socket: curl_socket_t) {
        pool.socketClosing(socket)
    }

    package func reactorTurnDidEnd(_ reactor: Reactor) {
        if !environment.deferred.isEmpty { performDeferred() }
        if pool.takeAdmissionDue() { admitWaiting() }
        if pool.wantsConnections { ConnectionGranter.grant(&pool) }
        for (journal, error) in catalog.writeBatch.commit() {
            logger.error(
                "could not write the journal",
                metadata: ["haul.journal": "\(journal.path)", "haul.error": "\(error)"]
            )
        }
        // After the commit: a sync's report must not overtake the row that it completes.
        disk.send()
        callers.answerSettledWaiters()
        Gauges(environment: environment, catalog: catalog).update(running: pool.count) {
            pool.takeJournalCountsDue(now: $0)
        }
        // The turn's events reach the manager's feed readers with one wake-up each, and the
        // downloads' own readers and waiters together.
        catalog.feed.wakeDeferred()
        catalog.feed.resumeTurnWaiters()
        // Idle: nothing queued or running, and no disk job whose result (a download's outcome)
        // is still to come; told after the turn's rows are committed and its events handed over,
        // so that waiters find every outcome recorded.
        if pool.takeIdle(diskPending: disk.pending, followsRows: !callers.follower.isEmpty) {
            catalog.resumeIdleWaiters()
        }
    }

    /// A disk job is still to report (an embedded loop's run waits for it).
    package var awaitsWorkOffLoop: Bool { disk.pending > 0 }

    package func reactorWasWoken(_ reactor: Reactor) {
        let commands = inbox.drain()
        guard !commands.isEmpty else { return }
        for command in commands where !callers.take(command) {
            switch command {
            case .queueChanged(let directory): pool.queueChanged(in: directory)
            case .run(let body): body()
            case .setRateLimits(let limits):
                environment.rateLimiter.setLimits(limits, admitted: pool.admitted.map(\.id))
            case .diskWorkDone(let results): diskWorkDone(results)
            case .recordPlacings(let journal, let rows, let answer): journal.recordPlacingsInTurn(rows, answer: answer)
            case .checkIdle: pool.waitForIdle()
            case .shutdown: shutdown()
            case .writeRows, .follow, .control, .settle, .headersArrived, .urlRefreshed:
                assertionFailure("a command of the callers', which Callers.take(_:) takes")
            }
        }
        callers.writeGatheredRows()
        admitAtTurnEnd()
    }

    /// Writes the rows callers asked for in one wake (``Callers/writeRows(_:)``).
    package func writeRows(_ writes: [RowWrite]) {
        reactor.assertOnLoop()
        callers.writeRows(writes)
    }

    /// Asks the pool machine `question` in place: read out of the stored property, the machine
    /// was copied whole across an opaque call (the Scheduler README says why); `inout` copies nothing.
    @inline(__always)
    private func askPool<Answer>(_ question: (inout PoolMachine<Transfer>) -> Answer) -> Answer {
        question(&pool)
    }

    /// Whether `transfer` is the one admitted under its id now (not an earlier one of its download).
    private func isCurrent(_ transfer: Transfer) -> Bool {
        let id = transfer.id
        return askPool { $0.isCurrent(transfer, as: id) }
    }

    /// The transfer admitted as `id`, if the download runs here now.
    func running(_ id: DownloadID) -> Transfer? { askPool { $0.member(id) } }

    /// curl reported a request done.
    package func reactor(_ reactor: Reactor, requestDidEnd raw: UnsafeMutableRawPointer, result: CURLcode) {
        requestEnded(raw, .requestEnded(raw, result))
    }

    /// The request of handle `raw` ended with `result`: curl reported it done, Haul's stall sweep
    /// ended it (``Transfer/stalledRequests(now:after:)``), or its write callback refused a chunk
    /// while the rate limiter unpaused it, which curl never reports. Its transfer (or the transfer
    /// of the segment it fetched) says what follows.
    private func requestEnded(_ raw: UnsafeMutableRawPointer, _ input: TransferInput) {
        guard let transfer = Transfer.owning(raw), isCurrent(transfer),
            let action = transfer.apply(input)
        else {
            reactor.remove(raw)  // a request of no transfer now
            return
        }
        perform(action, for: transfer)
        ConnectionGranter.changed(transfer, &pool)
        admitAtTurnEnd()
    }

    /// The most write buffers in use at once so far, and the names claimed for files about to be
    /// placed (``DownloadManager/holdings``). Loop thread, or after the loop ended.
    package var bufferPeakAndClaimedNames: (peakBuffers: Int, claimedNames: Int) {
        (environment.buffers.peakInUseCount, environment.claimedNameCount)
    }

    // MARK: retries

    /// Looks at `directory`'s queue again at `time`, when a download there may retry.
    private func wakeForRetry(in directory: String, at time: Double) {
        armRetryTimer(after: pool.wakeForRetry(in: directory, at: time, now: reactor.clock.wallSeconds))
    }

    /// The retry timer is the reactor's alarm, set `seconds` from now (``PoolMachine/wakeForRetry(in:at:now:)``).
    private func armRetryTimer(after seconds: Double?) {
        guard let seconds else { return }
        reactor.setAlarm(after: .milliseconds(Int64((seconds * 1000).rounded(.up))))
    }

    package func reactorAlarmRang(_ reactor: Reactor) {
        armRetryTimer(after: pool.retryTimerFired(now: reactor.clock.wallSeconds))
    }

    // MARK: admission: the best queue heads across journals take the slots that are free

    /// Asks for ``admitWaiting()`` at the end of this loop turn (``PoolMachine/admitAtTurnEnd()``).
    private func admitAtTurnEnd() { pool.admitAtTurnEnd() }

    /// Admits queued downloads while slots are free, the best head across every journal first
    /// (``QueueReader``), and arms the retry timer if a read set up a retry to wake for.
    private func admitWaiting() {
        var reader = QueueReader(catalog: catalog, clock: reactor.clock, logger: logger)
        while !pool.isShuttingDown, pool.admission.hasFreeSlot {
            guard let (journal, head, pending) = reader.next(&pool) else { break }
            admit(head, from: journal, unchangedSince: &pending.heads.changes)
        }
        armRetryTimer(after: reader.retryTimerDelay)
    }

    /// Admits `head` of `journal` (``TransferMaker``) and tells its transfer its first input.
    private func admit(_ head: Journal.QueuedRow, from journal: Journal, unchangedSince changes: inout Int64) {
        let maker = TransferMaker(catalog: catalog, environment: environment, controller: inbox, settings: settings)
        guard
            let admitted = maker.admit(head, from: journal, unchangedSince: &changes, callers: callers, into: &pool)
        else { return }
        if admitted.startsTimers { startTimers() }
        perform(admitted.transfer.apply(admitted.input), for: admitted.transfer)
    }

    // MARK: what a transfer hands back that reaches beyond it (a pause, a retry, an end frees its slot)

    /// Does what a transfer handed back once it carried out its own part (``SlotAction``).
    func perform(_ action: SlotAction?, for transfer: Transfer) {
        reactor.assertOnLoop()
        guard let action else { return }  // an input that was not for it now
        switch action {
        case .none:
            break
        case .askForHeaders(let question):
            callers.askForHeaders(question, for: transfer)
        case .askForFreshURL(let question):
            callers.askForFreshURL(question, for: transfer)
        case .paused(let sync):
            requestSync(transfer.id, sync)
            // A paused download is a row again; resuming queues it.
            leave(transfer, carrying: BetweenAttempts(leaving: transfer, restarts: 0))
        case .end:
            forget(transfer.id)
            leave(transfer)
        case .retry(let time, let sync, let restarts):
            requestSync(transfer.id, sync)
            // Restarts from zero are carried to its next attempt, with its handle's counts.
            leave(transfer, carrying: BetweenAttempts(leaving: transfer, restarts: restarts))
            wakeForRetry(in: transfer.handle.stateDirectoryPath, at: time)
        case .finish(let job):
            disk.add(.finish(job))
            takeAnswer(of: transfer)
            pool.startFinishing(transfer.id)
        case .finishStream:
            let id = transfer.id
            let done = { [unowned self] (result: Result<Int64, DownloadError>) in
                placed(id, outcome: result.map { PlacedFile(length: $0, modificationTime: 0) })
            }
            perform(transfer.apply(.finishStream(done)), for: transfer)
        case .openConnections:
            ConnectionGranter.want(for: transfer, &pool)
        case .answered:
            takeAnswer(of: transfer)
        case .leftHost:
            pool.leftHost(transfer.id)
        }
    }

    /// Performs what transfers handed up with no caller (``TransferEnvironment/deferred``), in order;
    /// a request's end is followed as curl's own report of one is (connections, the next admission).
    private func performDeferred() {
        for (transfer, action) in environment.takeDeferred() where isCurrent(transfer) {
            perform(action, for: transfer)
            switch action {
            case .openConnections, .answered, .leftHost: continue
            default: break
            }
            ConnectionGranter.changed(transfer, &pool)
            admitAtTurnEnd()
        }
    }

    /// What `transfer`'s first answer showed of its host, if not taken yet, goes to the connections'
    /// grant (``ConnectionGrants``); more may be admitted.
    private func takeAnswer(of transfer: Transfer) {
        guard let answer = transfer.takeAnswer() else { return }
        pool.answered(transfer.id, multiplexes: answer.multiplexes, socketsOpened: answer.socketsOpened)
    }

    /// The disk thread finished a download's file: its transfer completes, or goes on as the
    /// failure says.
    private func placed(_ id: DownloadID, outcome: Result<PlacedFile, DownloadError>) {
        guard let transfer = running(id) else { return }
        perform(transfer.apply(.placed(outcome)), for: transfer)
    }

    /// The download paused or ended: it frees its slot (a finishing one, which gave its slot up when
    /// its bytes were all received, leaves the finishing count) and becomes a row again, `carrying`
    /// what its next attempt here starts from (``BetweenAttempts``; `nil`: it ended).
    private func leave(_ transfer: Transfer, carrying: BetweenAttempts? = nil) {
        takeAnswer(of: transfer)
        let leaving = pool.leave(transfer.id, carrying: carrying)
        for waiter in leaving.waiting { ConnectionGranter.want(for: waiter, &pool) }
        guard let left = leaving.left else { return }
        environment.rateLimiter.release(left)
        if let directory = leaving.idleJournal { catalog.closeIfIdle(directory) }
    }

    /// A download ended (completed, failed, cancelled, handed over, followed to its end): nothing is
    /// kept of it, neither what its caller gave (``CallerGiven``) nor what an attempt carried.
    func forget(_ id: DownloadID) {
        pool.forget(id)
        callers.forget(id)
    }

    // MARK: syncs off the loop thread and their reports, the checkpoint, idle buffers and stalls

    /// Runs `job`, a sync of `id`'s partial file, off the loop thread (then its bytes are recorded
    /// as durable); `nil`: they are already.
    private func requestSync(_ id: DownloadID, _ job: DiskJob?) {
        guard let job else { return }
        environment.syncs.requested(id)
        disk.add(job)
    }

    /// The disk lanes reported: syncs recorded and files placed (``SyncRecords``), in order.
    private func diskWorkDone(_ results: [DiskResult]) {
        SyncRecords(catalog: catalog, environment: environment).take(results, running: running) {
            placed($0, outcome: $1)
        }
        disk.reported(results.count)
        // A shutdown waiting for the last report finishes now.
        if pool.diskReported(diskPending: disk.pending) { finishShutdown() }
    }

    /// Starts the checkpoint and idle-buffer timers with the first admission.
    private func startTimers() {
        if settings.checkpointInterval > .zero {
            reactor.repeatEvery(settings.checkpointInterval) { [unowned self] in checkpointReceiving() }
        }
        reactor.repeatEvery(.nanoseconds(Int64(FileSink.idleAge))) { [unowned self] in releaseIdleBuffers() }
    }

    /// Every `checkpointInterval`: write buffered bytes of receiving downloads to the kernel, record
    /// them, and sync them in the background.
    private func checkpointReceiving() {
        for transfer in pool.admitted { requestSync(transfer.id, transfer.checkpointReceiving()) }
    }

    /// Slow downloads give their buffers back (see ``FileSink``), idle buffers and easy handles are
    /// freed a whole period after they were last needed, requests that stalled are ended
    /// (``Transfer/stalledRequests(now:after:)``), and hosts whose first answer is late let their
    /// downloads go (``ConnectionGrants/answerWait``).
    private func releaseIdleBuffers() {
        let now = reactor.clock.uptimeNanoseconds
        let timeout = settings.stallTimeout.nanoseconds
        let stalled = pool.admitted.flatMap { transfer in
            transfer.sweep(now: now, stallTimeout: timeout).map { (transfer, $0) }
        }
        for (transfer, raw) in stalled {
            // Ended as curl ends a request that timed out: another connection takes its segment, or
            // the download is retried (resuming), or it fails. (An earlier one in this list may
            // have ended the transfer already: its handles are no longer its own then.)
            guard isCurrent(transfer) else { continue }
            requestEnded(raw, .stalled(raw, seconds: settings.stallTimeout.components.seconds))
        }
        pool.expireWaits(now: now)
        environment.buffers.trim()
        environment.easyHandles.trim()  // freed here, on the loop thread, as their deinit cleans up
    }

    // MARK: shutdown

    /// Pauses every transfer (interrupted, not paused: the next manager on the journal continues
    /// them) and stops the loop once their syncs are recorded.
    private func shutdown() {
        pool.beginShutdown()
        callers.beginShutdown()
        for transfer in pool.admitted { perform(transfer.apply(.shutdown), for: transfer) }
        // The pauses above asked for syncs; the journals close once those are recorded.
        if pool.shutdownEnds(diskPending: disk.pending) { finishShutdown() }
    }

    private func finishShutdown() {
        let handles = pool.end().map(\.handle) + catalog.liveHandles
        for download in handles {
            download.hub.close(with: DownloadError(code: .shutdown, url: download.url.redactedString))
        }
        reactorTurnDidEnd(reactor)
        catalog.closeJournals()
        catalog.feed.close()
        catalog.resumeIdleWaiters()
        callers.answerEveryWaiter()
        // Every easy handle goes before the share they use.
        environment.easyHandles.close()
        reactor.stop()
    }
}

extension Scheduler: ControlledPool {
    func queueChanged(in directory: String) { pool.queueChanged(in: directory) }
    var isShuttingDown: Bool { pool.isShuttingDown }
    var finishing: Set<DownloadID> { askPool { $0.admission.finishing } }
}
