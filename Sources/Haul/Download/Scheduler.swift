import CHaul
import Dispatch
import FoundationEssentials
import Glibc
import Logging

/// The loop thread's owner of every admitted download: takes the next row of the journals' queue
/// when a slot frees, feeds the transfers' state machines, and performs the actions they return.
///
/// Every method runs on the loop thread (reactor commands, curl callbacks, finished transfers).
final class Scheduler: ReactorDelegate, @unchecked Sendable {
    // @unchecked Sendable: created on the caller's thread, then used only on the loop thread; the
    // manager keeps a reference only to keep it alive.

    let configuration: DownloadManager.Configuration
    let reactor: Reactor
    let catalog: Catalog
    private let logger: Logger
    /// Admitted downloads (connecting, receiving, or finishing). Paused and queued ones are rows.
    private var transfers: [DownloadID: Transfer] = [:]
    /// Restarts from zero of downloads queued for a retry, carried to their next attempt: a server
    /// that answers every resume from the wrong byte ends in `rangeNotHonored`, not endless restarts.
    private var restartsBeforeRetry: [DownloadID: Int] = [:]
    /// curl's receive buffer per transfer (``receiveBufferSize(slots:)``).
    private let receiveBufferSize: Int
    /// State directories whose journal may hold queued rows.
    private var queuedDirectories: Set<String> = []
    private var active = 0
    /// How many downloads may hold a slot: ``DownloadManager/Configuration/maxConcurrentDownloads``,
    /// or fewer where the open-files limit is low (``DescriptorBudget``).
    private let slots: Int
    /// Partial files held open between writes, against the budget's share for them.
    private let openPartialFiles: OpenPartialFiles
    /// Slots held per host, and the hosts at their limit (``DownloadManager/Configuration/maxConcurrentDownloadsPerHost``).
    private var activeByHost: [String: Int] = [:]
    private var saturatedHosts: Set<String> = []
    /// The destination of every admitted download, until its file is in place or it stops: two
    /// downloads (of different URLs) renaming onto one path would each report a file the other
    /// replaced, so the second to be admitted fails with ``DownloadError/Code/destinationInUse``.
    private var writers: [String: DownloadID] = [:]
    /// Directories whose queue had rows only for saturated hosts: looked at again when one frees.
    private var directoriesWaitingForHosts: Set<String> = []
    private var shuttingDown = false
    /// Where partial files are synced, checked and renamed, away from the loop thread: serial lanes,
    /// a download's jobs in the one its id picks. While disk jobs are slow (a disk's `fdatasync`), all
    /// lanes are used: syncs from several threads share the file system's journal commits (8 threads
    /// synced 4,700 new 64 KiB files a second on this machine's ext4, one thread 1,600). While they are
    /// fast (tmpfs), one lane: more would only take CPU from the loop thread.
    private let diskLanes = (0..<8).map { DispatchQueue(label: "haul.disk.\($0)") }
    private let diskTiming = DiskTiming()
    /// The current turn's disk jobs, sent together when it ends.
    private var diskJobs: [DiskJob] = []
    /// Disk jobs not yet reported.
    private var pendingDiskJobs = 0
    /// Checkpoint syncs not yet reported, per download; `stale` once its partial was truncated
    /// since (such a report must not be recorded).
    private var checkpointSyncs: [DownloadID: (count: Int, stale: Bool)] = [:]
    private var stopWhenSynced = false
    private var timersStarted = false
    /// A task waits (``DownloadManager/waitUntilIdle()``) for no download to be queued or running.
    private var idleWaitersPending = false
    /// State directories whose journal holds downloads waiting to retry, with the earliest time one
    /// may run (seconds since 1970).
    private var retryWakes: [String: Double] = [:]
    private var retryTimer: OpaquePointer?
    private let retryPolicy: RetryPolicy
    /// Write buffers, reused across transfers.
    let buffers: BufferPool
    /// Easy handles of ended transfers, reset and kept for the next ones (as many as may run at once),
    /// and freed after a whole idle period (see ``releaseIdleBuffers()``). When only 64 were kept, a
    /// burst of finished transfers freed its handles and the next ones created new: 2,552 new
    /// handles for 10,000 downloads at 100 at once.
    private var idleEasyHandles: IdleStack<EasyHandle>
    /// Shared by every easy handle: TLS sessions and DNS answers.
    private let share: UnsafeMutableRawPointer?
    /// Set once the loop's shutdown freed `share`; a scheduler whose loop never ran frees it in deinit.
    private var shareCleanedUp = false
    private let progressIntervalNanoseconds: UInt64

    init(configuration: DownloadManager.Configuration, budget: DescriptorBudget, reactor: Reactor, catalog: Catalog) {
        self.configuration = configuration
        self.reactor = reactor
        self.catalog = catalog
        self.logger = configuration.logger
        self.retryPolicy = RetryPolicy(
            baseDelay: configuration.retryDelay,
            maximumDelay: configuration.maximumRetryDelay
        )
        let slots = min(configuration.maxConcurrentDownloads, budget.transfers)
        self.slots = slots
        self.openPartialFiles = OpenPartialFiles(limit: budget.openPartialFiles)
        if slots < configuration.maxConcurrentDownloads {
            configuration.logger.notice(
                "the open-files limit allows fewer downloads at once than configured",
                metadata: ["configured": "\(configuration.maxConcurrentDownloads)", "running at most": "\(slots)"]
            )
        }
        self.receiveBufferSize = Self.receiveBufferSize(slots: slots)
        self.buffers = BufferPool(
            bufferSize: configuration.bufferSize,
            idleLimit: slots,
            limit: Self.writeBufferLimit(bufferSize: configuration.bufferSize)
        )
        self.idleEasyHandles = IdleStack(limit: max(64, slots))
        let share = curl_share_init()
        if let share {
            _ = CHaul_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
            _ = CHaul_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
        }
        self.share = share
        let (seconds, attoseconds) = configuration.progressInterval.components
        self.progressIntervalNanoseconds =
            UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    // MARK: ReactorDelegate

    func reactorWillRun(_ reactor: Reactor) {
        catalog.writeBatch.attachCurrentThread()
    }

    func reactorTurnDidEnd(_ reactor: Reactor) {
        for (journal, error) in catalog.writeBatch.commit() {
            logger.error("could not write the journal", metadata: ["journal": "\(journal.path)", "error": "\(error)"])
        }
        // After the commit: a sync's report must not overtake the row that it completes.
        guard !diskJobs.isEmpty else { return }
        let laneCount = diskTiming.lanes(of: diskLanes.count)
        var lanes = [[DiskJob]](repeating: [], count: laneCount)
        for job in diskJobs {
            lanes[Int(UInt(bitPattern: job.id.hashValue) % UInt(laneCount))].append(job)
        }
        diskJobs.removeAll(keepingCapacity: true)
        let timing = diskTiming
        for (lane, jobs) in zip(diskLanes, lanes) where !jobs.isEmpty {
            lane.async {
                let start = DispatchTime.now().uptimeNanoseconds
                let results = jobs.map { $0.perform() }
                timing.record(nanoseconds: DispatchTime.now().uptimeNanoseconds - start, jobs: jobs.count)
                reactor.submit(.diskWorkDone(results))
            }
        }
    }

    func reactor(_ reactor: Reactor, handle commands: [ReactorCommand]) {
        for command in commands {
            switch command {
            case .queueChanged(let directory): queuedDirectories.insert(directory)
            case .pause(let download): pause(download, reactor: reactor)
            case .resume(let download): resume(download)
            case .cancel(let download): cancel(download, reactor: reactor)
            case .diskWorkDone(let results): diskWorkDone(results, reactor: reactor)
            case .checkIdle: idleWaitersPending = true
            case .shutdown: shutdown(reactor: reactor)
            }
        }
        admitWaiting(reactor: reactor)
    }

    func reactor(_ reactor: Reactor, transferDidFinish raw: UnsafeMutableRawPointer, result: CURLcode) {
        guard let context = EasyHandle.context(of: raw) else {
            reactor.remove(raw)
            return
        }
        let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
        reactor.remove(raw)
        guard let easy = transfer.easy else { return }
        if result == CURLE_OK && !transfer.headSeen {
            // An empty body never reached the write callback: decide from the head now.
            transfer.headSeen = true
            perform(decideResponse(of: transfer, easy: easy), for: transfer, reactor: reactor)
        }
        let ended: DownloadStateMachine.TransferResult
        if let writeError = transfer.writeError {
            ended = .failed(writeError)
        } else if result == CURLE_OK {
            ended = finishedResult(of: transfer)
        } else {
            let code = Int(result.rawValue)
            let message = easy.errorMessage ?? String(cString: curl_easy_strerror(result))
            let kind: DownloadError.Code = result == CURLE_PARTIAL_FILE ? .sizeMismatch : .transport
            ended = .failed(DownloadError(code: kind, url: transfer.urlForErrors, curlCode: code, detail: message))
        }
        recycle(easy)
        transfer.easy = nil
        if transfer.machine.isDone { return }
        let advanced =
            (transfer.sink?.receivedLength ?? 0) > (transfer.lengthAtAttemptStart ?? transfer.requestedOffset)
        perform(transfer.machine.transferEnded(ended, progressed: advanced), for: transfer, reactor: reactor)
        admitWaiting(reactor: reactor)
    }

    /// A transfer curl finished without error: did every announced byte arrive?
    private func finishedResult(of transfer: Transfer) -> DownloadStateMachine.TransferResult {
        guard case .receiving = transfer.machine.state, let sink = transfer.sink else { return .finished }
        if let end = transfer.rangeEnd, sink.receivedLength == end {
            return .rangeEnded
        }
        if let total = transfer.record.totalBytes, sink.receivedLength != total {
            return .failed(
                DownloadError(
                    code: .sizeMismatch,
                    url: transfer.urlForErrors,
                    detail: "the body ended after \(sink.receivedLength) of \(total) bytes"
                )
            )
        }
        if transfer.record.totalBytes == nil {
            transfer.record.totalBytes = sink.receivedLength
        }
        return .finished
    }

    // MARK: commands

    private func pause(_ download: Download, reactor: Reactor) {
        if let transfer = transfers[download.id] {
            if !transfer.machine.isDone { transfer.pausedByUser = true }
            perform(transfer.machine.pause(), for: transfer, reactor: reactor)
            return
        }
        // Queued or interrupted: only its row changes.
        updateRow(of: download, from: [.queued, .interrupted]) { record in
            record.state = .paused
            download.hub.publish(.paused(record.progress))
        }
    }

    private func resume(_ download: Download) {
        if transfers[download.id] != nil { return }  // admitted: it is not paused
        updateRow(of: download, from: [.paused, .interrupted]) { record in
            record.state = .queued
            record.queueSequence = catalog.nextQueueSequence()
            download.hub.publish(.queued)
        }
        queuedDirectories.insert(download.stateDirectoryPath)
    }

    private func cancel(_ download: Download, reactor: Reactor) {
        if let transfer = transfers[download.id] {
            perform(transfer.machine.cancel(), for: transfer, reactor: reactor)
            return
        }
        guard let journal = catalog.openJournal(for: download.stateDirectoryPath) else { return }
        journal.locked {
            guard let record = try? journal.record(for: download.id),
                [.queued, .paused, .interrupted].contains(record.state)
            else { return }
            journal.remove(download.id)
            restartsBeforeRetry[download.id] = nil
            download.hub.publish(.cancelled)
        }
    }

    /// Changes the row of a download that is not admitted, if it is in one of `states`; `change`
    /// runs with the journal locked (so events it publishes come before the loop's next ones).
    private func updateRow(
        of download: Download,
        from states: Set<DownloadRecord.State>,
        _ change: (inout DownloadRecord) -> Void
    ) {
        guard let journal = catalog.openJournal(for: download.stateDirectoryPath) else { return }
        journal.locked {
            guard var record = try? journal.record(for: download.id), states.contains(record.state) else { return }
            change(&record)
            do {
                try journal.save(record, for: download.id)
            } catch {
                logger.warning(
                    "could not write the journal",
                    metadata: ["url": "\(download.url.redactedString)", "error": "\(error)"]
                )
            }
        }
    }

    private func shutdown(reactor: Reactor) {
        shuttingDown = true
        for transfer in Array(transfers.values) where !transfer.machine.isDone {
            perform(transfer.machine.pause(), for: transfer, reactor: reactor)
            if !transfer.pausedByUser {
                // Interrupted, not paused: the next manager on this journal continues it.
                checkpoint(transfer, state: .queued, bytes: transfer.progress().bytesReceived)
            }
        }
        // The pauses above asked for syncs; the journals close once those are recorded.
        if pendingDiskJobs == 0 {
            finishShutdown(reactor: reactor)
        } else {
            stopWhenSynced = true
        }
    }

    deinit {
        // Only a scheduler whose loop never ran gets here with its share (no easy handle uses it).
        if !shareCleanedUp, let share { curl_share_cleanup(share) }
    }

    private func finishShutdown(reactor: Reactor) {
        let handles = transfers.values.map(\.download) + catalog.liveHandles
        for download in handles {
            download.hub.close(with: DownloadError(code: .shutdown, url: download.url.redactedString))
        }
        transfers.removeAll()
        queuedDirectories.removeAll()
        reactorTurnDidEnd(reactor)
        catalog.closeJournals()
        catalog.resumeIdleWaiters()
        // Every easy handle goes before the share they use.
        _ = idleEasyHandles.removeAll()
        if let share { curl_share_cleanup(share) }
        shareCleanedUp = true
        reactor.stop()
    }

    // MARK: checkpoints

    /// Syncs the partial file's first `bytes` off the loop thread, then records them as durable.
    private func requestSync(of transfer: Transfer, bytes: Int64, reactor: Reactor) {
        guard bytes > transfer.record.bytesSynced else { return }
        checkpointSyncs[transfer.id, default: (0, false)].count += 1
        addDiskJob(
            .checkpoint(transfer.id, directory: transfer.store.directory, path: transfer.partialPath, bytes: bytes)
        )
    }

    /// The partial file was emptied: syncs still running for it describe bytes that are gone.
    private func partialTruncated(_ transfer: Transfer) {
        transfer.record.bytesSynced = 0
        checkpointSyncs[transfer.id]?.stale = true
    }

    /// Queues a job for the background disk thread; it leaves with the others at the end of the turn.
    /// Every job is matched by one report in ``diskWorkDone(_:reactor:)``.
    private func addDiskJob(_ job: DiskJob) {
        pendingDiskJobs += 1
        diskJobs.append(job)
    }

    private func diskWorkDone(_ results: [DiskResult], reactor: Reactor) {
        for result in results {
            switch result {
            case .synced(let id, let directory, let bytes): synced(id, directory: directory, bytes: bytes)
            case .finished(let id, let outcome): finished(id, outcome: outcome, reactor: reactor)
            }
        }
        pendingDiskJobs -= results.count
        // A shutdown waiting for the last report finishes now.
        if stopWhenSynced && pendingDiskJobs == 0 {
            stopWhenSynced = false
            finishShutdown(reactor: reactor)
        }
    }

    private func synced(_ id: DownloadID, directory: String, bytes: Int64) {
        guard let entry = checkpointSyncs[id] else { return }
        checkpointSyncs[id] = entry.count > 1 ? (entry.count - 1, entry.stale) : nil
        // Ignore a failed sync, and one older than a truncation of the partial file.
        guard bytes >= 0, !entry.stale, let journal = catalog.openJournal(for: directory) else { return }
        if let transfer = transfers[id] {
            transfer.record.bytesSynced = max(transfer.record.bytesSynced, bytes)
        }
        try? journal.recordSynced(id, bytes: bytes)
    }

    /// Every `checkpointInterval`: write buffered bytes of receiving downloads to the kernel, record
    /// them, and sync them in the background.
    private func checkpointReceiving(reactor: Reactor) {
        for transfer in transfers.values {
            guard case .receiving = transfer.machine.state, let sink = transfer.sink else { continue }
            do {
                try sink.flush()
            } catch {
                continue  // the write callback meets the same error and fails the download
            }
            checkpoint(transfer, state: .running, bytes: sink.committedLength)
            requestSync(of: transfer, bytes: sink.committedLength, reactor: reactor)
        }
    }

    /// Starts the checkpoint and idle-buffer timers with the first admission.
    private func startTimers(reactor: Reactor) {
        guard !timersStarted else { return }
        timersStarted = true
        if configuration.checkpointInterval > .zero {
            reactor.repeatEvery(configuration.checkpointInterval) { [unowned self] in
                checkpointReceiving(reactor: reactor)
            }
        }
        reactor.repeatEvery(.nanoseconds(Int64(FileSink.idleAge))) { [unowned self] in
            releaseIdleBuffers()
        }
    }

    /// Slow downloads give their buffers back (see ``FileSink``): memory follows the transfers that
    /// are fast, not the ones that are live.
    private func releaseIdleBuffers() {
        let now = DispatchTime.now().uptimeNanoseconds
        for transfer in transfers.values {
            guard case .receiving = transfer.machine.state, transfer.writeError == nil, let sink = transfer.sink else {
                continue
            }
            do {
                if try sink.releaseIfIdle(now: now) { reportProgress(of: transfer, now: now) }
            } catch {
                transfer.writeError = transfer.attributed(error)  // the next chunk fails the transfer
            }
        }
        buffers.trim()
        _ = idleEasyHandles.trim()  // freed here, on the loop thread, as their deinit cleans up
    }

    /// Admits queued downloads while slots are free: the highest priority first, then the oldest,
    /// across every journal with queued rows.
    private func admitWaiting(reactor: Reactor) {
        while !shuttingDown, active < slots {
            guard let (journal, head) = nextQueued() else { break }
            admit(head, from: journal, reactor: reactor)
        }
        if idleWaitersPending, transfers.isEmpty, queuedDirectories.isEmpty, retryWakes.isEmpty,
            directoriesWaitingForHosts.isEmpty
        {
            idleWaitersPending = false
            catalog.resumeIdleWaiters()
        }
    }

    private func nextQueued() -> (Journal, Journal.QueueHead)? {
        var best: (journal: Journal, head: Journal.QueueHead)?
        for directory in queuedDirectories {
            guard let journal = catalog.openJournal(for: directory) else {
                queuedDirectories.remove(directory)
                continue
            }
            let now = Date().timeIntervalSince1970
            var head: Journal.QueueHead?
            do {
                let next = try journal.nextQueued(at: now, excludingHosts: saturatedHosts)
                head = next.head
                if head == nil, next.blocked { directoriesWaitingForHosts.insert(directory) }
                if head == nil, let retryAt = try journal.nextRetryTime(after: now) {
                    wakeForRetry(in: directory, at: retryAt)
                }
            } catch {
                logger.error("could not read the queue", metadata: ["journal": "\(journal.path)", "error": "\(error)"])
                head = nil
            }
            guard let head else {
                queuedDirectories.remove(directory)
                continue
            }
            if let current = best, !head.place.isAhead(of: current.head.place) { continue }
            best = (journal, head)
        }
        return best.map { ($0.journal, $0.head) }
    }

    /// Takes a queued row (marking it running) and starts its transfer.
    private func admit(_ head: Journal.QueueHead, from journal: Journal, reactor: Reactor) {
        let id = head.id
        let record: DownloadRecord
        do {
            guard let claimed = try journal.claim(head) else { return }  // no longer queued
            record = claimed
        } catch {
            logger.error("could not write the journal", metadata: ["journal": "\(journal.path)", "error": "\(error)"])
            queuedDirectories.remove(journal.directory)
            return
        }
        startTimers(reactor: reactor)
        guard let url = URL(string: record.url) else {
            journal.remove(id)
            logger.error(
                "a journal row has an unreadable URL",
                metadata: ["journal": "\(journal.path)", "url": "\(record.url)"]
            )
            return
        }
        let (download, _) = catalog.handle(id, replacingFinished: true) {
            Download(
                id: id,
                url: url,
                destinationPath: record.destination,
                stateDirectoryPath: journal.directory,
                reactor: reactor,
                census: catalog.census,
                progress: record.progress
            )
        }
        let transfer = Transfer(
            download: download,
            record: record,
            store: journal,
            scheduler: self,
            restarts: restartsBeforeRetry.removeValue(forKey: id) ?? 0,
            retryLimit: max(0, configuration.retryLimit)
        )
        transfers[id] = transfer
        if let writer = writers[record.destination].flatMap({ transfers[$0] }) {
            let error = DownloadError(
                code: .destinationInUse,
                url: url.redactedString,
                path: record.destination,
                detail: "another download (of \(writer.urlForErrors))"
            )
            perform(transfer.machine.fail(error), for: transfer, reactor: reactor)
            return
        }
        writers[record.destination] = id
        if record.revalidate {
            transfer.revalidating = true
            unlink(transfer.partialPath)
        }
        perform(transfer.machine.admit(), for: transfer, reactor: reactor)
    }

    /// Looks at `directory`'s queue again at `time`, when a download there may retry.
    private func wakeForRetry(in directory: String, at time: Double) {
        retryWakes[directory] = min(retryWakes[directory] ?? time, time)
        armRetryTimer()
    }

    private func armRetryTimer() {
        guard let earliest = retryWakes.values.min() else { return }
        if retryTimer == nil {
            retryTimer = reactor.makeOneShotTimer { [unowned self] in retryTimerFired() }
        }
        guard let retryTimer else { return }
        let seconds = max(0, earliest - Date().timeIntervalSince1970)
        reactor.arm(retryTimer, after: .milliseconds(Int64((seconds * 1000).rounded(.up))))
    }

    private func retryTimerFired() {
        let now = Date().timeIntervalSince1970
        for (directory, time) in retryWakes where time <= now + 0.001 {
            retryWakes[directory] = nil
            queuedDirectories.insert(directory)
        }
        armRetryTimer()
        admitWaiting(reactor: reactor)
    }

    // MARK: actions

    private func perform(_ action: DownloadStateMachine.Action, for transfer: Transfer, reactor: Reactor) {
        switch action {
        case .none, .rejectBody:
            break
        case .startRequest(let truncating):
            startRequest(for: transfer, truncating: truncating, reactor: reactor)
        case .acceptBody(let total, let truncating, let restart):
            acceptBody(for: transfer, total: total, truncating: truncating, restart: restart)
        case .pause:
            let progress = setAside(transfer, state: .paused, reactor: reactor)
            transfer.download.hub.publish(.paused(progress))
            // A paused download is a row again; resuming queues it.
            forget(transfer)
        case .enqueue:
            transfer.record.queueSequence = catalog.nextQueueSequence()
            checkpoint(transfer, state: .queued, bytes: transfer.progress().bytesReceived)
            transfer.download.hub.publish(.queued)
            queuedDirectories.insert(transfer.store.directory)
            forget(transfer)
        case .cancel:
            stopRequest(of: transfer, reactor: reactor)
            transfer.sink = nil
            transfer.store.remove(transfer.id)
            transfer.download.hub.publish(.cancelled)
            forget(transfer)
        case .complete:
            complete(transfer, reactor: reactor)
        case .retry(let error):
            let delay = retryPolicy.delay(
                afterFailures: transfer.machine.failures,
                retryAfter: transfer.retryAfter,
                random: Double.random(in: 0..<1)
            )
            transfer.record.failures = transfer.machine.failures
            transfer.record.retryAt =
                Date().timeIntervalSince1970 + Double(delay.components.seconds)
                + Double(delay.components.attoseconds) / 1e18
            transfer.record.lastError = error.description
            if transfer.machine.restarts > 0 { restartsBeforeRetry[transfer.id] = transfer.machine.restarts }
            setAside(transfer, state: .queued, reactor: reactor)
            logger.info(
                "retrying",
                metadata: ["url": "\(transfer.urlForErrors)", "after": "\(delay)", "error": "\(error)"]
            )
            transfer.download.hub.publish(.retrying(error, after: delay))
            forget(transfer)
            wakeForRetry(in: transfer.store.directory, at: transfer.record.retryAt)
        case .fail(let error):
            stopRequest(of: transfer, reactor: reactor)
            try? transfer.sink?.close()
            transfer.sink = nil
            let bytes = Transfer.fileLength(transfer.partialPath) ?? 0
            if bytes == 0 {
                // Nothing worth resuming (a 404, a refused connection): leave no trace.
                transfer.store.remove(transfer.id)
            } else {
                transfer.record.lastError = error.description
                checkpoint(transfer, state: .failed, bytes: bytes)
            }
            logger.info("download failed", metadata: ["url": "\(transfer.urlForErrors)", "error": "\(error)"])
            transfer.download.hub.publish(.failed(error))
            forget(transfer)
        }
    }

    private func startRequest(for transfer: Transfer, truncating: Bool, reactor: Reactor) {
        do {
            let sink: FileSink
            if let existing = transfer.sink {
                sink = existing
            } else {
                sink = try FileSink(
                    path: transfer.partialPath,
                    pool: buffers,
                    openFiles: openPartialFiles,
                    startsEmpty: !transfer.record.mayHaveStarted
                )
            }
            transfer.sink = sink
            if transfer.lengthAtAttemptStart == nil { transfer.lengthAtAttemptStart = sink.committedLength }
            let partialIsLongerThanFile = transfer.record.totalBytes.map { sink.committedLength > $0 } ?? false
            if truncating || partialIsLongerThanFile {
                try sink.truncate()
                partialTruncated(transfer)
                transfer.record.entityTag = nil
                transfer.record.lastModified = nil
                transfer.record.totalBytes = nil
            }
            // Bytes still in the buffer are the file's too: they are written before the next ones.
            transfer.requestedOffset = sink.receivedLength
        } catch {
            finish(transfer, with: transfer.attributed(error), reactor: reactor)
            return
        }
        guard let easy = transfer.easy ?? idleEasyHandles.pop() ?? EasyHandle() else {
            finish(
                transfer,
                with: DownloadError(code: .internalError, url: transfer.urlForErrors, detail: "curl_easy_init failed"),
                reactor: reactor
            )
            return
        }
        easy.setReceiveBufferSize(receiveBufferSize)
        easy.configure(
            url: transfer.download.url.absoluteString,
            configuration: configuration,
            share: share,
            write: Scheduler.writeCallback,
            context: Unmanaged.passUnretained(transfer).toOpaque()
        )
        if transfer.revalidating {
            easy.setConditions(
                rangeFrom: 0,
                ifRange: nil,
                ifNoneMatch: transfer.record.entityTag,
                ifModifiedSince: transfer.record.entityTag == nil ? transfer.record.lastModified : nil
            )
        } else {
            easy.setConditions(rangeFrom: transfer.requestedOffset, ifRange: transfer.record.ifRangeValidator)
        }
        transfer.easy = easy
        transfer.headSeen = false
        transfer.head = nil
        transfer.writeError = nil
        transfer.retryAfter = nil
        let code = reactor.add(easy.raw)
        guard code == CURLM_OK else {
            recycle(easy)
            transfer.easy = nil
            finish(
                transfer,
                with: DownloadError(
                    code: .internalError,
                    url: transfer.urlForErrors,
                    detail: "curl_multi_add_handle failed: \(String(cString: curl_multi_strerror(code)))"
                ),
                reactor: reactor
            )
            return
        }
        if !transfer.holdsSlot {
            transfer.holdsSlot = true
            active += 1
            let host = transfer.hostKey
            activeByHost[host, default: 0] += 1
            if let limit = configuration.maxConcurrentDownloadsPerHost, activeByHost[host]! >= limit {
                saturatedHosts.insert(host)
            }
        }
        logger.debug(
            "request",
            metadata: ["url": "\(transfer.urlForErrors)", "from": "\(transfer.requestedOffset)"]
        )
        transfer.download.hub.publish(.connecting(transfer.progress()))
    }

    /// curl's receive buffer for each transfer when `slots` may run at once: a share of
    /// ``receiveBufferBudget``, between curl's default 16 KiB and 512 KiB. A manager of a few
    /// transfers reads in large chunks, as the curl tool does with its 100 KiB (each read of 16 KiB
    /// costs a `recvfrom` and a zero-timeout `poll`: 131,000 system calls per GiB, 4,100 at 512 KiB);
    /// one of many transfers keeps curl's 16 KiB each. By the slots, not by the transfers running
    /// now: the first transfers of a busy manager would otherwise all start with large buffers.
    static func receiveBufferSize(slots: Int) -> Int {
        let share = receiveBufferBudget / max(1, slots)
        let size = share / EasyHandle.defaultReceiveBufferSize * EasyHandle.defaultReceiveBufferSize
        return min(512 * 1024, max(EasyHandle.defaultReceiveBufferSize, size))
    }
    static let receiveBufferBudget = 1024 * 1024

    /// How many write buffers may be in use at once: ``writeBufferBudget`` worth, at least 4.
    static func writeBufferLimit(bufferSize: Int) -> Int {
        max(4, writeBufferBudget / max(1, bufferSize))
    }
    /// The memory write buffers may take at once (2 MiB: 16 of the default 128 KiB). Transfers that
    /// receive while all are in use write each chunk straight to their partial file instead.
    static let writeBufferBudget = 2 * 1024 * 1024

    private func acceptBody(for transfer: Transfer, total: Int64?, truncating: Bool, restart: RestartReason?) {
        guard let sink = transfer.sink, let head = transfer.head else { return }
        transfer.head = nil  // read once; thousands of live transfers need not keep their heads
        if let total, let expected = transfer.record.expectedSize, total != expected {
            transfer.writeError = DownloadError(
                code: .checksumMismatch,
                url: transfer.urlForErrors,
                detail: "the server announced \(total) bytes where \(expected) were expected"
            )
            return
        }
        if let total, let maximum = configuration.maximumFileSize, total > maximum {
            transfer.writeError = DownloadError(
                code: .fileTooLarge,
                url: transfer.urlForErrors,
                detail: "the file is \(total) bytes, more than the maximum of \(maximum)"
            )
            return
        }
        do {
            if truncating {
                try sink.truncate()
                partialTruncated(transfer)
            }
        } catch {
            transfer.writeError = transfer.attributed(error)
            return
        }
        transfer.record.state = .running
        transfer.record.attempts += 1
        if let restart {
            logger.info("restarting from zero", metadata: ["url": "\(transfer.urlForErrors)", "reason": "\(restart)"])
            transfer.download.hub.publish(.restarted(restart))
        }
        if truncating || transfer.requestedOffset == 0 {
            transfer.record.entityTag = head.entityTag
            transfer.record.lastModified = head.lastModified
        }
        if total != nil || truncating {
            transfer.record.totalBytes = total
        }
        // A resume trusts the row's validators for the bytes in the partial file, so the row must have
        // this response's before any of its bytes is written there. Until then it can wait: a download
        // that ends inside its buffer writes its row once, at completion, instead of twice.
        transfer.rowBehind = true
        if sink.committedLength > 0 {
            catchUpRow(of: transfer)
            if transfer.writeError != nil { return }
        } else {
            sink.beforeFirstWrite = { [unowned self, unowned transfer] () throws(DownloadError) in
                catchUpRow(of: transfer)
                if let error = transfer.writeError { throw error }
            }
        }
        transfer.download.hub.publish(.receiving(transfer.progress()))
    }

    private func complete(_ transfer: Transfer, reactor: Reactor) {
        stopRequest(of: transfer, reactor: reactor)
        // The disk thread writes what is still buffered, makes the bytes durable, checks them and only
        // then renames them into place.
        var remainder: FileSink.Remainder?
        if let sink = transfer.sink {
            transfer.sink = nil
            if transfer.record.totalBytes == nil { transfer.record.totalBytes = sink.receivedLength }
            remainder = sink.handOff()
            // A whole file in its buffer is the disk thread's to write, unless half of the buffers
            // are in use (mostly waiting on the disk thread): then the loop writes it and frees its
            // buffer now, so that receiving transfers still find one.
            if transfer.rowBehind, buffers.inUseCount > buffers.limit / 2,
                let written = remainder?.writtenNameless(in: FilePath.directory(of: transfer.partialPath))
            {
                remainder = written
            }
        }
        addDiskJob(
            .finish(
                FinishJob(
                    id: transfer.id,
                    partialPath: transfer.partialPath,
                    destination: transfer.download.destinationPath,
                    remainder: remainder,
                    writeWhole: transfer.rowBehind,
                    keepDestination: transfer.notModified,
                    expectedSize: transfer.record.expectedSize,
                    expectedChecksum: transfer.record.expectedChecksum.flatMap(Checksum.init),
                    url: transfer.urlForErrors
                )
            )
        )
    }

    /// The disk thread finished a download's file: record and report the completion, or the failure.
    private func finished(_ id: DownloadID, outcome: Result<Int64, DownloadError>, reactor: Reactor) {
        guard let transfer = transfers[id] else { return }
        let length: Int64
        switch outcome {
        case .failure(let error):
            perform(transfer.machine.completionFailed(error), for: transfer, reactor: reactor)
            return
        case .success(let placed):
            length = placed
        }
        let total = transfer.record.totalBytes ?? length
        transfer.record.totalBytes = total
        transfer.record.revalidate = false
        checkpoint(transfer, state: .completed, bytes: total)
        transfer.download.hub.publish(
            .progress(
                DownloadProgress(
                    bytesReceived: total,
                    totalBytes: total,
                    bytesPerSecond: transfer.speed.bytesPerSecond,
                    estimatedTimeRemaining: .zero
                )
            )
        )
        transfer.download.hub.publish(.completed(transfer.download.destination))
        forget(transfer)
    }

    /// Records where a download stands. A failure to write the journal is logged, not fatal: the
    /// partial file itself is what a resume trusts first.
    private func checkpoint(_ transfer: Transfer, state: DownloadRecord.State, bytes: Int64) {
        transfer.record.state = state
        transfer.record.bytesCommitted = bytes
        transfer.rowBehind = false
        transfer.sink?.beforeFirstWrite = nil
        do {
            try transfer.store.update(transfer.record, for: transfer.id)
        } catch {
            logger.warning(
                "could not write the journal",
                metadata: ["url": "\(transfer.urlForErrors)", "error": "\(error)"]
            )
        }
    }

    /// Writes the row that ``acceptBody`` left for later; a failure fails the transfer.
    private func catchUpRow(of transfer: Transfer) {
        guard transfer.rowBehind else { return }
        transfer.rowBehind = false
        do {
            try transfer.store.update(transfer.record, for: transfer.id)
        } catch {
            transfer.writeError = transfer.attributed(error)
        }
    }

    /// Fails a download for a local reason outside its transfer (set-up errors).
    private func finish(_ transfer: Transfer, with error: DownloadError, reactor: Reactor) {
        perform(transfer.machine.fail(error), for: transfer, reactor: reactor)
    }

    /// Stops a transfer that will continue later (paused, or waiting to retry): writes what is
    /// buffered, records the row in `state` with the bytes on disk, and syncs them off the loop.
    @discardableResult
    private func setAside(_ transfer: Transfer, state: DownloadRecord.State, reactor: Reactor) -> DownloadProgress {
        stopRequest(of: transfer, reactor: reactor)
        do {
            try transfer.sink?.close()
        } catch {
            logger.warning(
                "could not write buffered bytes",
                metadata: ["url": "\(transfer.urlForErrors)", "error": "\(error)"]
            )
        }
        transfer.sink = nil
        transfer.speed.reset()
        let progress = transfer.progress()
        checkpoint(transfer, state: state, bytes: progress.bytesReceived)
        requestSync(of: transfer, bytes: progress.bytesReceived, reactor: reactor)
        return progress
    }

    /// Keeps an easy handle that left the multi handle for the next transfer.
    private func recycle(_ easy: EasyHandle) {
        guard idleEasyHandles.items.count < idleEasyHandles.limit else { return }
        easy.reset()
        _ = idleEasyHandles.push(easy)
    }

    /// Takes the request out of curl, if any.
    private func stopRequest(of transfer: Transfer, reactor: Reactor) {
        if let easy = transfer.easy {
            reactor.remove(easy.raw)
            recycle(easy)
            transfer.easy = nil
        }
    }

    /// The download paused or ended: it frees its slot (a finishing download keeps it until its file
    /// is in place, so that transfers never outnumber slots) and becomes a row again.
    private func forget(_ transfer: Transfer) {
        if transfer.holdsSlot {
            transfer.holdsSlot = false
            active -= 1
            let host = transfer.hostKey
            let remaining = (activeByHost[host] ?? 1) - 1
            activeByHost[host] = remaining > 0 ? remaining : nil
            if saturatedHosts.remove(host) != nil {
                queuedDirectories.formUnion(directoriesWaitingForHosts)
                directoriesWaitingForHosts.removeAll()
            }
        }
        transfers.removeValue(forKey: transfer.id)
        if writers[transfer.record.destination] == transfer.id { writers[transfer.record.destination] = nil }
    }

    // MARK: body

    private func decision(for transfer: Transfer, head: ResponseHead) -> ResponseDecision {
        ResponseDecision.decide(
            head: head,
            requestedOffset: transfer.requestedOffset,
            knownTotal: transfer.record.totalBytes,
            knownEntityTag: transfer.requestedOffset > 0 ? transfer.record.entityTag : nil,
            revalidating: transfer.revalidating
        )
    }

    private func decideResponse(of transfer: Transfer, easy: EasyHandle) -> DownloadStateMachine.Action {
        let head = transfer.responseHead(of: easy)
        transfer.head = head
        transfer.rangeEnd = ResponseDecision.rangeEnd(of: head)
        let decision = decision(for: transfer, head: head)
        // Retry-After only matters for a response that is retried (each header lookup walks them all).
        if !(200..<300).contains(head.status) {
            transfer.retryAfter = RetryPolicy.parseRetryAfter(easy.header("Retry-After"))
        }
        if transfer.revalidating, case .alreadyComplete = decision { transfer.notModified = true }
        logger.debug(
            "response",
            metadata: ["url": "\(transfer.urlForErrors)", "status": "\(head.status)", "decision": "\(decision)"]
        )
        let action = transfer.machine.responseReceived(decision)
        if case .retryFromZero(let reason) = decision, case .closing(.restartFromZero) = transfer.machine.state {
            logger.info("restarting from zero", metadata: ["url": "\(transfer.urlForErrors)", "reason": "\(reason)"])
            transfer.download.hub.publish(.restarted(reason))
        }
        return action
    }

    /// curl's write callback: the first call decides on the response; later calls append.
    private static let writeCallback: CHaul_data_callback = { pointer, size, count, context in
        let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        return transfer.scheduler.receive(UnsafeRawBufferPointer(start: pointer, count: length), for: transfer)
    }

    fileprivate func receive(_ bytes: UnsafeRawBufferPointer, for transfer: Transfer) -> Int {
        if !transfer.headSeen {
            transfer.headSeen = true
            guard let easy = transfer.easy else { return CURL_WRITEFUNC_ERROR }
            let action = decideResponse(of: transfer, easy: easy)
            guard case .acceptBody = action else { return CURL_WRITEFUNC_ERROR }
            // Performing acceptBody touches only the file and events, never the multi handle.
            perform(action, for: transfer, reactor: reactor)
        }
        guard transfer.writeError == nil, case .receiving = transfer.machine.state, let sink = transfer.sink else {
            return CURL_WRITEFUNC_ERROR
        }
        if let maximum = configuration.maximumFileSize, sink.receivedLength + Int64(bytes.count) > maximum {
            transfer.writeError = DownloadError(
                code: .fileTooLarge,
                url: transfer.urlForErrors,
                detail: "the body grew past the maximum of \(maximum) bytes"
            )
            return CURL_WRITEFUNC_ERROR
        }
        do {
            let now = DispatchTime.now().uptimeNanoseconds
            if try sink.append(bytes, now: now) {
                reportProgress(of: transfer, now: now)
            }
        } catch {
            transfer.writeError = transfer.attributed(error)
            return CURL_WRITEFUNC_ERROR
        }
        return bytes.count
    }

    private func reportProgress(of transfer: Transfer, now: UInt64) {
        guard let sink = transfer.sink else { return }
        transfer.speed.record(bytes: sink.committedLength, at: now)
        guard now &- transfer.lastProgressAt >= progressIntervalNanoseconds else { return }
        transfer.lastProgressAt = now
        transfer.download.hub.publish(.progress(transfer.progress()))
    }
}

private let CURL_WRITEFUNC_ERROR = Int(0xFFFF_FFFF)
