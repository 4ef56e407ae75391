import CHaul
import FoundationEssentials
import Glibc
import HaulIO
import HaulTransfer
import HaulValues
import Logging
import Tracing

/// The loop thread's owner of every admitted download: takes the next row of the journals' queue
/// when a slot frees (``Admission`` decides who may run), creates its ``Transfer``, and performs the
/// actions a transfer returns that reach beyond it (slots, the queue, events of the end, the disk
/// lanes). Its other jobs are in `Scheduler+Commands.swift` (what callers ask), `+Actions.swift`
/// (a download's end or pause) and `+Checkpoints.swift` (syncs, timers, disk reports).
///
/// Every method runs on the loop thread (reactor callbacks, commands, finished transfers).
package final class Scheduler: ReactorDelegate, @unchecked Sendable {
    // @unchecked Sendable: created on the caller's thread, then used only on the loop thread; the
    // manager keeps a reference only to keep it alive.

    /// What transfers share: pools, limits, the loop.
    let environment: TransferEnvironment
    /// What the queue and the scheduler share: open journals, live handles, the feed.
    let catalog: Catalog
    /// Where callers' commands and the disk lanes' reports arrive.
    let inbox: CommandInbox<SchedulerCommand>
    /// Syncs, checks and renames, off the loop thread.
    let disk: DiskLanes
    /// Every decision about who runs (``PoolMachine``): the admitted transfers among it.
    var pool: PoolMachine<Transfer>
    /// The loop's side of the callers: their rows, what they gave, their hooks and callers.
    private(set) lazy var callers = Callers(
        pool: self,
        catalog: catalog,
        environment: environment,
        settings: settings,
        inbox: inbox
    )
    /// The loop's timers of the scheduler, made when first needed.
    var timers = Timers()

    /// The scheduler's one-shot timer, and when the queue gauges last read the journals.
    struct Timers {
        var retry: OpaquePointer?
        /// Uptime nanoseconds.
        var gaugesReadAt: UInt64 = 0
    }

    var settings: SchedulerSettings { pool.settings }
    var reactor: Reactor { environment.reactor }
    var logger: Logger { settings.logger }

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

    /// Write buffers, reused across transfers.
    var buffers: BufferPool { environment.buffers }

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
        Gauges(environment: environment, catalog: catalog).update(running: pool.count, readAt: &timers.gaugesReadAt)
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
        // Consecutive callers' rows are written together (``writeRows(_:)``), in their place among
        // the other commands.
        var writes: [RowWrite] = []
        for command in commands {
            if case .writeRows(let write) = command {
                writes.append(write)
                continue
            }
            if !writes.isEmpty {
                writeRows(writes)
                writes.removeAll()
            }
            switch command {
            case .queueChanged(let directory): pool.queueChanged(in: directory)
            case .writeRows: break  // gathered above, written together
            case .run(let body): body()
            case .follow(let directory, let rows): callers.follower.follow(rows, in: directory)
            case .control(let download, .pause): callers.pause(download)
            case .control(let download, .resume): callers.resume(download)
            case .control(let download, .cancel): callers.cancel(download)
            case .control(let download, .limitRate(let rate)): callers.limitRate(of: download, to: rate)
            case .control(let download, .handedOver): callers.handedOver(download)
            case .settle(let download, let control, let answer): callers.settle(download, control, answer: answer)
            case .setRateLimits(let limits):
                environment.rateLimiter.setLimits(limits, admitted: pool.admitted.map(\.id))
            case .diskWorkDone(let results): diskWorkDone(results)
            case .recordPlacings(let journal, let rows, let answer): journal.recordPlacingsInTurn(rows, answer: answer)
            case .checkIdle: pool.waitForIdle()
            case .headersArrived(let id, let transfer, let result): callers.headersArrived(id, for: transfer, result)
            case .urlRefreshed(let id, let transfer, let result): callers.urlRefreshed(id, for: transfer, result)
            case .shutdown: shutdown()
            }
        }
        if !writes.isEmpty { writeRows(writes) }
        admitAtTurnEnd()
    }

    /// Writes the rows callers asked for in one wake (``Callers/writeRows(_:)``).
    package func writeRows(_ writes: [RowWrite]) {
        reactor.assertOnLoop()
        callers.writeRows(writes)
    }

    /// Asks the pool machine `question` in place. Read out of this class's stored property, the
    /// machine would be copied whole (each of its tables retained, then released) whenever the
    /// reading code calls something the compiler cannot see into, as a dictionary lookup: the
    /// optimized SIL ends a read's access at the load and keeps the value with `retain_value`. An
    /// `inout` access stays open for the question, and nothing is copied.
    @inline(__always)
    func askPool<Answer>(_ question: (inout PoolMachine<Transfer>) -> Answer) -> Answer {
        question(&pool)
    }

    /// Whether `transfer` is the one admitted under its id now (not an earlier one of its download).
    func isCurrent(_ transfer: Transfer) -> Bool {
        let id = transfer.id
        return askPool { $0.isCurrent(transfer, as: id) }
    }

    /// The transfer admitted as `id`, if any.
    func admitted(_ id: DownloadID) -> Transfer? { askPool { $0.member(id) } }

    /// curl reported a request done.
    package func reactor(_ reactor: Reactor, requestDidEnd raw: UnsafeMutableRawPointer, result: CURLcode) {
        requestEnded(raw, .requestEnded(raw, result))
    }

    /// The request of handle `raw` ended with `result`: curl reported it done, Haul's stall sweep
    /// ended it (``Transfer/stalledRequests(now:after:)``), or its write callback refused a chunk
    /// while the rate limiter unpaused it, which curl never reports. Its transfer (or the transfer
    /// of the segment it fetched) says what follows.
    func requestEnded(_ raw: UnsafeMutableRawPointer, _ input: TransferInput) {
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
    /// placed now (the facade's ``DownloadManager/holdings``). Loop thread, or after the loop ended.
    package var bufferPeakAndClaimedNames: (peakBuffers: Int, claimedNames: Int) {
        (environment.buffers.peakInUseCount, environment.claimedNameCount)
    }

    // MARK: retries

    /// Looks at `directory`'s queue again at `time`, when a download there may retry.
    func wakeForRetry(in directory: String, at time: Double) {
        armRetryTimer(after: pool.wakeForRetry(in: directory, at: time, now: reactor.clock.wallSeconds))
    }

    func armRetryTimer(after seconds: Double?) {
        guard let seconds else { return }
        if timers.retry == nil {
            timers.retry = reactor.makeOneShotTimer { [unowned self] in
                armRetryTimer(after: pool.retryTimerFired(now: reactor.clock.wallSeconds))
            }
        }
        guard let retry = timers.retry else { return }
        reactor.arm(retry, after: .milliseconds(Int64((seconds * 1000).rounded(.up))))
    }
}

extension Scheduler: ControlledPool {
    func running(_ id: DownloadID) -> Transfer? { admitted(id) }

    func queueChanged(in directory: String) { pool.queueChanged(in: directory) }

    var isShuttingDown: Bool { pool.isShuttingDown }
}
