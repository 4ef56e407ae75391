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

    let settings: SchedulerSettings
    let reactor: Reactor
    let inbox: CommandInbox<SchedulerCommand>
    let catalog: Catalog
    var logger: Logger { settings.logger }
    /// What every transfer shares: pools, limits, the loop.
    let environment: TransferEnvironment
    /// Admitted downloads (connecting, receiving, or finishing). Paused and queued ones are rows.
    var transfers: [DownloadID: Transfer] = [:]
    /// How many of `transfers` write into each state directory (a journal in use is never closed).
    var transfersByDirectory: [String: Int] = [:]
    var admission: Admission
    /// A slot may have freed or a queue changed this turn: queued downloads are admitted at its end
    /// (``admitAtTurnEnd()``).
    var admissionDue = false
    var shuttingDown = false
    /// Syncs, checks and renames, off the loop thread.
    let disk: DiskLanes
    var stopWhenSynced = false
    var timersStarted = false
    /// A task waits (``DownloadManager/waitUntilIdle()``) for no download to be queued or running.
    var idleWaitersPending = false
    /// Callers awaiting a control (``settle(_:_:answer:)``).
    var settleWaiters: [SettleWaiter] = []
    /// When the queue gauges last read the journals (uptime nanoseconds).
    var queueGaugesReadAt: UInt64 = 0
    var retryTimer: OpaquePointer?
    /// When the retry timer last fired (seconds since 1970): it fires at most every
    /// ``retryWakeGap``, so that thousands of jittered retries (a host down) wake the queue about ten
    /// times a second, each taking every retry due, not once per retry.
    var retryTimerFiredAt: Double = 0
    /// A quarter of the first retry delay, at most 100 ms: a retry waits at most that much longer.
    var retryWakeGap: Double { min(0.1, environment.retryPolicy.baseDelay.inSeconds / 4) }
    /// Segmented transfers that asked for connections this turn (``SlotAction/openConnections``),
    /// granted at its end after the downloads waiting for a slot.
    var connectionsWanted: [DownloadID: Transfer] = [:]
    /// Segmented transfers that wanted a connection the limits did not allow yet.
    var connectionWaiters: [DownloadID: Transfer] = [:]
    /// Rows another manager runs that this one was asked for (``follow(_:in:)``), and those paused
    /// here meanwhile.
    var following = FollowedRows()
    var followTimer: OpaquePointer?

    package init(
        settings: SchedulerSettings,
        environment: TransferEnvironment,
        inbox: CommandInbox<SchedulerCommand>,
        catalog: Catalog
    ) {
        self.settings = settings
        self.reactor = environment.reactor
        self.inbox = inbox
        self.disk = DiskLanes(report: { [inbox] results in inbox.report(results) })
        self.catalog = catalog
        self.admission = Admission(
            slots: settings.slots,
            perHostLimit: settings.perHostLimit,
            connectionLimit: settings.connectionLimit,
            finishingLimit: settings.finishingLimit,
            streamsPerConnection: settings.streamsPerConnection
        )
        self.environment = environment
    }

    /// Write buffers, reused across transfers.
    var buffers: BufferPool { environment.buffers }

    // MARK: ReactorDelegate

    package func reactorWillRun(_ reactor: Reactor) {
        catalog.writeBatch.attachCurrentThread()
        catalog.feed.attachCurrentThread()
    }

    package func reactor(_ reactor: Reactor, socketOpened socket: curl_socket_t, for easy: UnsafeMutableRawPointer) {
        guard admission.grants != nil, let transfer = Transfer.owning(easy) else { return }
        admission.socketOpened(socket, by: transfer.id, order: reactor.socketsOpened)
    }

    package func reactor(_ reactor: Reactor, socketWillClose socket: curl_socket_t) {
        if admission.socketClosing(socket) { admitAtTurnEnd() }
    }

    package func reactorTurnDidEnd(_ reactor: Reactor) {
        if !environment.deferred.isEmpty { performDeferred() }
        if admissionDue {
            admissionDue = false
            admitWaiting()
        }
        if !connectionsWanted.isEmpty { grantConnections() }
        for (journal, error) in catalog.writeBatch.commit() {
            logger.error(
                "could not write the journal",
                metadata: ["haul.journal": "\(journal.path)", "haul.error": "\(error)"]
            )
        }
        // After the commit: a sync's report must not overtake the row that it completes.
        disk.send()
        if !settleWaiters.isEmpty { answerSettledWaiters() }
        updateGauges()
        // The turn's events reach the manager's feed readers with one wake-up each, and the
        // downloads' own readers and waiters together.
        catalog.feed.wakeDeferred()
        catalog.feed.resumeTurnWaiters()
        // Idle: nothing queued or running, and no disk job whose result (a download's outcome)
        // is still to come; told after the turn's rows are committed and its events handed over,
        // so that waiters find every outcome recorded.
        if idleWaitersPending, transfers.isEmpty, following.isEmpty, admission.queuesAreEmpty, disk.pending == 0 {
            idleWaitersPending = false
            catalog.resumeIdleWaiters()
        }
    }

    package func reactorWasWoken(_ reactor: Reactor) {
        let commands = inbox.drain()
        guard !commands.isEmpty else { return }
        for command in commands {
            switch command {
            case .queueChanged(let directory): admission.queueChanged(in: directory)
            case .follow(let directory, let rows): follow(rows, in: directory)
            case .control(let download, .pause): pause(download)
            case .control(let download, .resume): resume(download)
            case .control(let download, .cancel): cancel(download)
            case .control(let download, .limitRate(let rate)): limitRate(of: download, to: rate)
            case .control(let download, .handedOver): handedOver(download)
            case .settle(let download, let control, let answer): settle(download, control, answer: answer)
            case .setRateLimits(let limits): environment.rateLimiter.setLimits(limits, admitted: transfers.keys)
            case .diskWorkDone(let results): diskWorkDone(results)
            case .checkIdle: idleWaitersPending = true
            case .headersArrived(let id, let transfer, let result): headersArrived(id, for: transfer, result)
            case .urlRefreshed(let id, let transfer, let result): urlRefreshed(id, for: transfer, result)
            case .shutdown: shutdown()
            }
        }
        admitAtTurnEnd()
    }

    /// curl reported a request done.
    package func reactor(_ reactor: Reactor, transferDidFinish raw: UnsafeMutableRawPointer, result: CURLcode) {
        requestEnded(raw, result: result)
    }

    /// The request of handle `raw` ended with `result`: curl reported it done, Haul's stall sweep
    /// ended it (``Transfer/stalledRequests(now:after:)``), or its write callback refused a chunk
    /// while the rate limiter unpaused it, which curl never reports. Its transfer (or the transfer
    /// of the segment it fetched) says what follows.
    func requestEnded(_ raw: UnsafeMutableRawPointer, result: CURLcode) {
        guard let transfer = Transfer.owning(raw), transfers[transfer.id] === transfer,
            let action = transfer.ended(request: raw, result: result)
        else {
            reactor.remove(raw)  // a request of no transfer now
            return
        }
        perform(action, for: transfer)
        connectionsChanged(transfer)
        admitAtTurnEnd()
    }

    // MARK: retries

    /// Looks at `directory`'s queue again at `time`, when a download there may retry.
    func wakeForRetry(in directory: String, at time: Double) {
        admission.wakeForRetry(in: directory, at: time)
        armRetryTimer()
    }

    private func armRetryTimer() {
        guard let earliest = admission.nextRetryWake else { return }
        if retryTimer == nil {
            retryTimer = reactor.makeOneShotTimer { [unowned self] in retryTimerFired() }
        }
        guard let retryTimer else { return }
        let now = Date().timeIntervalSince1970
        let seconds = max(0, earliest - now, retryTimerFiredAt + retryWakeGap - now)
        reactor.arm(retryTimer, after: .milliseconds(Int64((seconds * 1000).rounded(.up))))
    }

    private func retryTimerFired() {
        retryTimerFiredAt = Date().timeIntervalSince1970
        admission.retriesDue(at: retryTimerFiredAt)
        armRetryTimer()
        admitAtTurnEnd()
    }
}
