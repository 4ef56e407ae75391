import CHaul
import FoundationEssentials
import Glibc
import Logging
import Tracing

/// The loop thread's owner of every admitted download: takes the next row of the journals' queue
/// when a slot frees (``Admission`` decides who may run), creates its ``Transfer``, and performs the
/// actions a transfer returns that reach beyond it (slots, the queue, events of the end, the disk
/// lanes). Its other jobs are in `Scheduler+Commands.swift` (what callers ask), `+Actions.swift`
/// (a download's end or pause) and `+Checkpoints.swift` (syncs, timers, disk reports).
///
/// Every method runs on the loop thread (reactor callbacks, commands, finished transfers).
final class Scheduler: ReactorDelegate, @unchecked Sendable {
    // @unchecked Sendable: created on the caller's thread, then used only on the loop thread; the
    // manager keeps a reference only to keep it alive.

    let configuration: DownloadManager.Configuration
    let reactor: Reactor
    let inbox: CommandInbox<SchedulerCommand>
    let catalog: Catalog
    let logger: Logger
    /// What every transfer shares: pools, limits, the loop.
    let environment: TransferEnvironment
    /// Admitted downloads (connecting, receiving, or finishing). Paused and queued ones are rows.
    var transfers: [DownloadID: Transfer] = [:]
    /// How many of `transfers` write into each state directory (a journal in use is never closed).
    var transfersByDirectory: [String: Int] = [:]
    /// The configured state directory, whose journal is never closed as idle.
    let keptDirectory: String?
    /// Restarts from zero of downloads queued for a retry, carried to their next attempt: a server
    /// that answers every resume from the wrong byte ends in `rangeNotHonored`, not endless restarts.
    var restartsBeforeRetry: [DownloadID: Int] = [:]
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
    /// When the queue gauges last read the journals (uptime nanoseconds).
    var queueGaugesReadAt: UInt64 = 0
    var retryTimer: OpaquePointer?
    /// Segmented transfers that wanted a connection the limits did not allow yet.
    var connectionWaiters: [DownloadID: Transfer] = [:]
    let retryPolicy: RetryPolicy

    init(
        configuration: DownloadManager.Configuration,
        budget: DescriptorBudget,
        reactor: Reactor,
        inbox: CommandInbox<SchedulerCommand>,
        catalog: Catalog
    ) {
        self.configuration = configuration
        self.keptDirectory = DownloadManager.configuredStateDirectory(configuration)
        self.reactor = reactor
        self.inbox = inbox
        self.disk = DiskLanes(report: { [inbox] results in inbox.report(results) })
        self.catalog = catalog
        self.logger = configuration.logger
        self.retryPolicy = RetryPolicy(
            baseDelay: configuration.retryDelay,
            maximumDelay: configuration.maximumRetryDelay
        )
        let slots = min(configuration.maxConcurrentDownloads, budget.transfers)
        self.admission = Admission(
            slots: slots,
            perHostLimit: configuration.maxConcurrentDownloadsPerHost,
            connectionLimit: budget.transfers,
            finishingLimit: Self.finishingLimit(slots: slots, openPartialFiles: budget.openPartialFiles)
        )
        if slots < configuration.maxConcurrentDownloads {
            configuration.logger.info(
                "the open-files limit allows fewer downloads at once than configured",
                metadata: ["haul.configured": "\(configuration.maxConcurrentDownloads)", "haul.slots": "\(slots)"]
            )
        }
        let options = EasyHandle.Options(
            maximumRedirects: configuration.maximumRedirects,
            userAgent: configuration.userAgent,
            connectTimeout: configuration.connectTimeout,
            stallTimeout: configuration.stallTimeout,
            certificateAuthorityFile: configuration.certificateAuthorityFile?.path,
            decodesCompression: configuration.decodesCompression,
            proxy: configuration.proxy?.absoluteString ?? (configuration.ignoresProxyEnvironment ? "" : nil),
            noProxy: configuration.proxyBypass?.joined(separator: ",")
                ?? (configuration.ignoresProxyEnvironment ? "" : nil)
        )
        self.environment = TransferEnvironment(
            reactor: reactor,
            easyHandles: EasyHandlePool(
                options: options,
                receiveBufferSize: Self.receiveBufferSize(slots: slots),
                keeping: max(64, slots)
            ),
            buffers: BufferPool(
                bufferSize: configuration.bufferSize,
                idleLimit: slots,
                limit: Self.writeBufferLimit(bufferSize: configuration.bufferSize, slots: slots)
            ),
            openPartialFiles: OpenPartialFiles(limit: budget.openPartialFiles),
            census: catalog.census,
            logger: configuration.logger,
            progressInterval: configuration.progressInterval,
            maximumFileSize: configuration.maximumFileSize,
            retryLimit: configuration.retryLimit,
            connectionRetryLimit: configuration.connectionRetryLimit,
            resumesWithoutValidator: configuration.resumesWithoutValidator,
            setsModificationTimeFromServer: configuration.setsModificationTimeFromServer,
            defaultHeaders: configuration.headers,
            refreshesURLs: configuration.urlRefresher != nil,
            preallocatesFiles: configuration.preallocatesFiles,
            rateLimits: configuration.rateLimits,
            connectionsPerFile: configuration.connectionsPerFile,
            minimumSegmentSize: configuration.minimumSegmentSize,
            metrics: HaulMetrics(factory: configuration.metricsFactory),
            tracer: configuration.tracer ?? InstrumentationSystem.tracer
        )
    }

    /// Write buffers, reused across transfers.
    var buffers: BufferPool { environment.buffers }

    // MARK: ReactorDelegate

    func reactorWillRun(_ reactor: Reactor) {
        catalog.writeBatch.attachCurrentThread()
        catalog.feed.attachCurrentThread()
    }

    func reactorTurnDidEnd(_ reactor: Reactor) {
        if !environment.refusedWhenUnpaused.isEmpty {
            let refused = environment.refusedWhenUnpaused
            environment.refusedWhenUnpaused = []
            for (handle, code) in refused { self.reactor(reactor, transferDidFinish: handle, result: code) }
        }
        if admissionDue {
            admissionDue = false
            admitWaiting()
        }
        if !environment.wantingConnections.isEmpty { grantConnections() }
        for (journal, error) in catalog.writeBatch.commit() {
            logger.error(
                "could not write the journal",
                metadata: ["haul.journal": "\(journal.path)", "haul.error": "\(error)"]
            )
        }
        // After the commit: a sync's report must not overtake the row that it completes.
        disk.send()
        updateGauges()
        // The turn's events reach the manager's feed readers with one wake-up each.
        catalog.feed.wakeDeferred()
        // Idle: nothing queued or running, and no disk job whose result (a download's outcome)
        // is still to come; told after the turn's rows are committed and its events handed over,
        // so that waiters find every outcome recorded.
        if idleWaitersPending, transfers.isEmpty, admission.queuesAreEmpty, disk.pending == 0 {
            idleWaitersPending = false
            catalog.resumeIdleWaiters()
        }
    }

    func reactorWasWoken(_ reactor: Reactor) {
        let commands = inbox.drain()
        guard !commands.isEmpty else { return }
        for command in commands {
            switch command {
            case .queueChanged(let directory): admission.queueChanged(in: directory)
            case .control(let download, .pause): pause(download)
            case .control(let download, .resume): resume(download)
            case .control(let download, .cancel): cancel(download)
            case .control(let download, .limitRate(let rate)): limitRate(of: download, to: rate)
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

    func reactor(_ reactor: Reactor, transferDidFinish raw: UnsafeMutableRawPointer, result: CURLcode) {
        guard let context = EasyHandle.context(of: raw) else {
            reactor.remove(raw)
            return
        }
        // The context is a transfer (its own request) or one of its other connections.
        let owner = Unmanaged<AnyObject>.fromOpaque(context).takeUnretainedValue()
        if let fetch = owner as? SegmentFetch {
            let transfer = fetch.transfer
            guard fetch.easy?.raw == raw, transfers[transfer.id] === transfer else {
                reactor.remove(raw)
                return
            }
            perform(transfer.fetchFinished(fetch, result: result), for: transfer)
            connectionsChanged(transfer)
            admitAtTurnEnd()
            return
        }
        guard let transfer = owner as? Transfer, transfer.easy?.raw == raw else {
            reactor.remove(raw)
            return
        }
        perform(transfer.requestFinished(result), for: transfer)
        connectionsChanged(transfer)
        admitAtTurnEnd()
    }

    // MARK: connections

    /// Grants segmented transfers the connections they asked for this turn, as far as the per-host
    /// limit and the open-files budget allow (``Admission``); the ones still wanting ask again when a
    /// connection closes.
    private func grantConnections() {
        let wanting = environment.wantingConnections
        environment.wantingConnections = [:]
        for (id, transfer) in wanting where transfers[id] === transfer {
            while transfer.wantsConnection, admission.mayOpenConnection(for: id, live: transfer.liveConnections) {
                guard transfer.openConnection() else { break }
                admission.setConnections(id, transfer.liveConnections)
            }
            admission.setConnections(id, transfer.liveConnections)
            if transfer.wantsConnection { connectionWaiters[id] = transfer }
        }
    }

    /// `transfer`'s connections may have changed: the counts follow, and transfers waiting for a
    /// connection ask again.
    func connectionsChanged(_ transfer: Transfer) {
        if transfers[transfer.id] === transfer {
            admission.setConnections(transfer.id, transfer.liveConnections)
            transfer.askForConnections()
        }
        guard !connectionWaiters.isEmpty else { return }
        for (id, waiter) in connectionWaiters {
            connectionWaiters[id] = nil
            if transfers[id] === waiter { waiter.askForConnections() }
        }
    }

    // MARK: admission

    /// Asks for ``admitWaiting()`` at the end of this loop turn, once every callback of the turn has
    /// run. Admitted inside the callback that freed a slot, each new request left alone while the
    /// others were still being read, and curl sent it within the next socket's action: a local
    /// server went idle and was woken for almost every request. Admitted together, the turn's
    /// requests go out together at the start of the next turn.
    func admitAtTurnEnd() { admissionDue = true }

    /// Admits queued downloads while slots are free: the highest priority first, then the oldest,
    /// across every journal with queued rows. Each journal's queue is read once for as many heads as
    /// slots are free (`read`, by state directory), and again only when those are taken and more may
    /// be queued. (In 10,000 small downloads at 100 at once, a turn fills about 40 slots: read for
    /// each, the queue took a quarter of the journal's time on the loop.)
    func admitWaiting() {
        var read: [String: QueueRead] = [:]
        while !shuttingDown, admission.hasFreeSlot {
            guard let (journal, head, pending) = nextQueued(&read) else { break }
            admit(head, from: journal, unchangedSince: &pending.heads.changes)
        }
    }

    /// A journal's queue heads read in this admission pass. (A class: mutated through a dictionary's
    /// subscript, the heads cost two allocations per admission, the accessor's.)
    private final class QueueRead {
        var heads: Journal.QueueHeads
        init(_ heads: Journal.QueueHeads) { self.heads = heads }
    }

    /// The best head across the queued directories, taken off the front of its directory's `read`.
    private func nextQueued(_ read: inout [String: QueueRead]) -> (Journal, Journal.QueueHead, QueueRead)? {
        var best: (journal: Journal, head: Journal.QueueHead, read: QueueRead)?
        for directory in admission.queuedDirectories {
            guard let journal = catalog.openJournal(for: directory) else {
                admission.queueDrained(in: directory)
                read[directory] = nil
                continue
            }
            var pending = read[directory]
            // Heads whose host reached its limit since the read wait, as the read would have left them.
            while let pending, let first = pending.heads.first, admission.saturatedHosts.contains(first.record.host) {
                pending.heads.passOverFirst()
            }
            if pending.map({ $0.heads.count == 0 && $0.heads.mayHaveMore }) ?? true {
                let blockedBefore = pending?.heads.blocked ?? false
                pending = readQueue(of: journal, in: directory).map(QueueRead.init)
                if blockedBefore { pending?.heads.blocked = true }
                read[directory] = pending
            }
            guard let pending, let head = pending.heads.first else {
                admission.queueDrained(in: directory, blockedByHosts: pending?.heads.blocked ?? false)
                read[directory] = nil
                closeJournalIfIdle(directory)
                continue
            }
            if let current = best, !head.place.isAhead(of: current.head.place) { continue }
            best = (journal, head, pending)
        }
        guard let best else { return nil }
        _ = best.read.heads.removeFirst()
        return best
    }

    /// Up to as many of `journal`'s queue heads as slots are free; none when it cannot be read. When
    /// none may run now, a retry's time wakes the queue again.
    private func readQueue(of journal: Journal, in directory: String) -> Journal.QueueHeads? {
        let now = Date().timeIntervalSince1970
        do {
            let heads = try journal.nextQueued(
                at: now,
                excludingHosts: admission.saturatedHosts,
                limit: admission.freeSlots
            )
            if heads.count == 0, let retryAt = try journal.nextRetryTime(after: now) {
                wakeForRetry(in: directory, at: retryAt)
            }
            return heads
        } catch {
            logger.error(
                "could not read the queue",
                metadata: ["haul.journal": "\(journal.path)", "haul.error": "\(error)"]
            )
            return nil
        }
    }

    /// Takes a queued row (marking it running) and starts its transfer.
    /// `changes` is the journal's count of changed rows when `head` was read, moved on by the claim
    /// (``Journal/claim(_:unchangedSince:)``).
    private func admit(_ head: Journal.QueueHead, from journal: Journal, unchangedSince changes: inout Int64) {
        let id = head.id
        let record: DownloadRecord
        do {
            guard let claimed = try journal.claim(head, unchangedSince: &changes) else { return }  // no longer queued
            record = claimed
        } catch {
            logger.error(
                "could not write the journal",
                metadata: ["haul.journal": "\(journal.path)", "haul.error": "\(error)"]
            )
            admission.queueDrained(in: journal.directory)
            return
        }
        startTimers()
        // The row's URL has no user name or password; one asked for with them in this process has them.
        guard let url = catalog.rememberedURL(id) ?? URL(string: record.url) else {
            journal.remove(id)
            logger.error(
                "a journal row has an unreadable URL",
                metadata: ["haul.journal": "\(journal.path)", "haul.url": "\(record.url)"]
            )
            return
        }
        let (download, _) = catalog.handle(id) {
            catalog.makeHandle(
                id,
                url: url,
                destinationPath: record.destination,
                stateDirectoryPath: journal.directory,
                progress: record.progress,
                controller: inbox
            )
        }
        let transfer = Transfer(
            download: download,
            record: record,
            rowID: head.rowID,
            store: journal,
            environment: environment,
            restarts: restartsBeforeRetry.removeValue(forKey: id) ?? 0,
            mirrors: record.mirrors.isEmpty
                ? [] : catalog.rememberedMirrors(id) ?? record.mirrors.compactMap { URL(string: $0) },
            logger: catalog.rememberedLogger(id),
            context: catalog.rememberedContext(id),
            stream: catalog.rememberedStream(id)
        )
        transfers[id] = transfer
        transfersByDirectory[journal.directory, default: 0] += 1
        if record.revalidate { unlink(transfer.partialPath) }
        admission.startTransferring(id, host: transfer.hostKey)
        environment.metrics.started.increment()
        environment.rateLimiter.admit(transfer, ownLimit: record.maxBytesPerSecond)
        if !record.headerNames.isEmpty {
            guard let headers = catalog.rememberedHeaders(id) else {
                // Restored from the journal, which has their names only: never sent without them.
                askForHeaders(of: transfer, named: record.headerNames)
                return
            }
            transfer.headers = DownloadHeader.merged(configuration.headers, headers)
        }
        perform(transfer.admit(), for: transfer)
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
        let seconds = max(0, earliest - Date().timeIntervalSince1970)
        reactor.arm(retryTimer, after: .milliseconds(Int64((seconds * 1000).rounded(.up))))
    }

    private func retryTimerFired() {
        admission.retriesDue(at: Date().timeIntervalSince1970)
        armRetryTimer()
        admitAtTurnEnd()
    }
}
