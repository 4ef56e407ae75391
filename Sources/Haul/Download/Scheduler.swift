import CHaul
import Foundation
import Glibc
import Logging

/// The loop thread's owner of every download: admits them up to the concurrency limit, feeds their
/// state machines, and performs the actions the machines return.
///
/// Every method runs on the loop thread (reactor commands, curl callbacks, finished transfers).
final class Scheduler: ReactorDelegate, @unchecked Sendable {
    // @unchecked Sendable: created on the caller's thread, then used only on the loop thread; the
    // manager keeps a reference only to keep it alive.

    let configuration: DownloadManager.Configuration
    let reactor: Reactor
    private let logger: Logger
    private var transfers: [DownloadID: Transfer] = [:]
    /// Downloads waiting for a slot, first in first out. Entries that left the idle state are skipped.
    private var queue: [Transfer] = []
    private var queueHead = 0
    private var active = 0
    private var shuttingDown = false
    /// Where partial files are `fdatasync`ed, away from the loop thread.
    private let syncQueue = DispatchQueue(label: "haul.checkpoint-sync")
    private var pendingSyncs = 0
    private var stopWhenSynced = false
    private var checkpointTimerStarted = false
    /// The journal of each state directory in use, opened on first use and closed at shutdown.
    private var journals: [String: Journal] = [:]
    /// Called on the loop thread when a download reaches a final state.
    let onFinal: @Sendable (DownloadID) -> Void
    private let progressIntervalNanoseconds: UInt64

    init(
        configuration: DownloadManager.Configuration,
        reactor: Reactor,
        onFinal: @escaping @Sendable (DownloadID) -> Void
    ) {
        self.configuration = configuration
        self.reactor = reactor
        self.logger = configuration.logger
        self.onFinal = onFinal
        let (seconds, attoseconds) = configuration.progressInterval.components
        self.progressIntervalNanoseconds = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    // MARK: ReactorDelegate

    func reactor(_ reactor: Reactor, handle commands: [ReactorCommand]) {
        for command in commands {
            switch command {
            case .add(let download): add(download, reactor: reactor)
            case .pause(let id):
                if let transfer = transfers[id] {
                    if !transfer.machine.isDone { transfer.pausedByUser = true }
                    perform(transfer.machine.pause(), for: transfer, reactor: reactor)
                }
            case .resume(let id):
                if let transfer = transfers[id] {
                    transfer.pausedByUser = false
                    perform(transfer.machine.resume(), for: transfer, reactor: reactor)
                }
            case .adopt(let handoff): adopt(handoff, reactor: reactor)
            case .finalSynced(let id): finalSynced(id, reactor: reactor)
            case .synced(let id, let directory, let bytes, let generation):
                synced(id, directory: directory, bytes: bytes, generation: generation, reactor: reactor)
            case .cancel(let id): transfers[id].map { perform($0.machine.cancel(), for: $0, reactor: reactor) }
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
        transfer.easy = nil
        if transfer.machine.isDone { return }
        perform(transfer.machine.transferEnded(ended), for: transfer, reactor: reactor)
        admitWaiting(reactor: reactor)
    }

    /// A transfer curl finished without error: was every announced byte written?
    private func finishedResult(of transfer: Transfer) -> DownloadStateMachine.TransferResult {
        guard case .receiving = transfer.machine.state, let sink = transfer.sink else { return .finished }
        do {
            try sink.flush()
        } catch {
            return .failed(transfer.attributed(error))
        }
        if let total = transfer.record.totalBytes, sink.committedLength != total {
            return .failed(
                DownloadError(
                    code: .sizeMismatch, url: transfer.urlForErrors,
                    detail: "the body ended after \(sink.committedLength) of \(total) bytes"))
        }
        if transfer.record.totalBytes == nil {
            transfer.record.totalBytes = sink.committedLength
        }
        return .finished
    }

    // MARK: commands

    private func add(_ download: Download, reactor: Reactor) {
        if transfers[download.id] != nil { return }
        let journal: Journal
        do {
            journal = try self.journal(for: download.stateDirectory.path)
        } catch {
            // No journal, no transfer: the download fails before it starts, touching no file.
            var error = error
            error.url = download.url.redactedString
            download.hub.publish(.failed(error))
            onFinal(download.id)
            return
        }
        let transfer = Transfer(download: download, store: journal, scheduler: self)
        transfers[download.id] = transfer
        if transfer.destinationIsComplete, configuration.revalidatesCompletedFiles,
            transfer.record.entityTag != nil || transfer.record.lastModified != nil
        {
            transfer.revalidating = true
            unlink(transfer.partialPath)
        } else if transfer.destinationIsComplete {
            logger.debug("already complete", metadata: ["url": "\(transfer.urlForErrors)"])
            perform(transfer.machine.foundComplete(), for: transfer, reactor: reactor)
            return
        }
        if transfer.record.completed && !transfer.revalidating {
            // The file recorded as complete is gone or changed at its destination: fetch it anew.
            transfer.record = DownloadRecord(url: download.url.absoluteString, destination: download.destination.path)
            unlink(transfer.partialPath)
        }
        transfer.record.state = .queued
        transfer.pausedByUser = false
        do {
            try journal.save(transfer.record, for: transfer.id)
        } catch {
            finish(transfer, with: transfer.attributed(error), reactor: reactor)
            return
        }
        download.hub.publish(.queued)
        enqueue(transfer)
    }

    private func shutdown(reactor: Reactor) {
        shuttingDown = true
        for transfer in transfers.values where !transfer.machine.isDone {
            perform(transfer.machine.pause(), for: transfer, reactor: reactor)
            if !transfer.pausedByUser {
                // Interrupted, not paused: the next manager on this journal continues it.
                checkpoint(transfer, state: .queued, bytes: transfer.progress().bytesReceived)
            }
        }
        // The pauses above asked for syncs; the journals close once those are recorded.
        if pendingSyncs == 0 {
            finishShutdown(reactor: reactor)
        } else {
            stopWhenSynced = true
        }
    }

    private func finishShutdown(reactor: Reactor) {
        for transfer in transfers.values {
            transfer.download.hub.close(
                with: DownloadError(code: .shutdown, url: transfer.urlForErrors))
        }
        transfers.removeAll()
        queue.removeAll()
        for journal in journals.values { journal.close() }
        journals.removeAll()
        reactor.stop()
    }

    // MARK: checkpoints

    /// Syncs the partial file's first `bytes` off the loop thread, then records them as durable.
    private func requestSync(of transfer: Transfer, bytes: Int64, reactor: Reactor) {
        guard bytes > transfer.record.bytesSynced else { return }
        let (id, directory, generation) = (transfer.id, transfer.store.directory, transfer.generation)
        syncOffLoop(transfer.partialPath, reactor: reactor) { durable in
            .synced(id, directory: directory, bytes: durable ? bytes : -1, generation: generation)
        }
    }

    /// `fdatasync`s `path` on the background queue, then sends the loop `report(synced)`. Every call
    /// is matched by one ``syncReported(reactor:)`` when its report is handled.
    private func syncOffLoop(
        _ path: String, reactor: Reactor, report: @escaping @Sendable (Bool) -> ReactorCommand
    ) {
        pendingSyncs += 1
        syncQueue.async {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            var durable = false
            if descriptor >= 0 {
                durable = fdatasync(descriptor) == 0
                close(descriptor)
            }
            reactor.submit(report(durable))
        }
    }

    /// One background sync was reported; a shutdown waiting for the last one finishes now.
    private func syncReported(reactor: Reactor) {
        pendingSyncs -= 1
        if stopWhenSynced && pendingSyncs == 0 {
            stopWhenSynced = false
            finishShutdown(reactor: reactor)
        }
    }

    private func synced(_ id: DownloadID, directory: String, bytes: Int64, generation: Int, reactor: Reactor) {
        defer { syncReported(reactor: reactor) }
        // Ignore a failed sync, a download gone or finished, and a sync older than a truncation.
        guard bytes >= 0, let journal = journals[directory], let transfer = transfers[id],
            transfer.generation == generation, !transfer.record.completed
        else { return }
        transfer.record.bytesSynced = max(transfer.record.bytesSynced, bytes)
        try? journal.recordSynced(id, bytes: transfer.record.bytesSynced)
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

    private func startCheckpointTimer(reactor: Reactor) {
        guard !checkpointTimerStarted, configuration.checkpointInterval > .zero else { return }
        checkpointTimerStarted = true
        reactor.repeatEvery(configuration.checkpointInterval) { [unowned self] in
            checkpointReceiving(reactor: reactor)
        }
    }

    /// Takes over a journal opened by the manager and the downloads it restored from it.
    private func adopt(_ handoff: JournalHandoff, reactor: Reactor) {
        journals[handoff.journal.directory] = handoff.journal
        startCheckpointTimer(reactor: reactor)
        for (download, startPaused) in handoff.downloads {
            let transfer = Transfer(download: download, store: handoff.journal, scheduler: self)
            transfers[download.id] = transfer
            if startPaused {
                perform(transfer.machine.pause(), for: transfer, reactor: reactor)
            } else {
                transfer.record.state = .queued
                download.hub.publish(.queued)
                enqueue(transfer)
            }
        }
    }

    private func journal(for directory: String) throws(DownloadError) -> Journal {
        if let journal = journals[directory] { return journal }
        let journal = try Journal(directory: directory, bootID: configuration.bootID)
        journals[directory] = journal
        startCheckpointTimer(reactor: reactor)
        return journal
    }

    private func enqueue(_ transfer: Transfer) {
        queue.append(transfer)
    }

    private func admitWaiting(reactor: Reactor) {
        while !shuttingDown, active < configuration.maxConcurrentDownloads, queueHead < queue.count {
            let transfer = queue[queueHead]
            queueHead += 1
            guard case .idle = transfer.machine.state, transfers[transfer.id] === transfer else { continue }
            perform(transfer.machine.admit(), for: transfer, reactor: reactor)
        }
        if queueHead > 1024 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
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
            stopRequest(of: transfer, reactor: reactor)
            do {
                try transfer.sink?.close()
            } catch {
                logger.warning("could not write buffered bytes on pause", metadata: ["error": "\(error)"])
            }
            transfer.sink = nil
            transfer.speed.reset()
            let progress = transfer.progress()
            checkpoint(transfer, state: .paused, bytes: progress.bytesReceived)
            requestSync(of: transfer, bytes: progress.bytesReceived, reactor: reactor)
            transfer.download.hub.publish(.paused(progress))
        case .enqueue:
            transfer.download.hub.publish(.queued)
            enqueue(transfer)
        case .cancel:
            stopRequest(of: transfer, reactor: reactor)
            transfer.sink = nil
            transfer.store.remove(transfer.id)
            transfer.download.hub.publish(.cancelled)
            forget(transfer)
        case .complete:
            complete(transfer, reactor: reactor)
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
                sink = try FileSink(path: transfer.partialPath, bufferSize: configuration.bufferSize)
            }
            transfer.sink = sink
            let partialIsLongerThanFile = transfer.record.totalBytes.map { sink.committedLength > $0 } ?? false
            if truncating || partialIsLongerThanFile {
                try sink.truncate()
                transfer.generation += 1
                transfer.record.bytesSynced = 0
                transfer.record.entityTag = nil
                transfer.record.lastModified = nil
                transfer.record.totalBytes = nil
            }
            transfer.requestedOffset = sink.committedLength
        } catch {
            finish(transfer, with: transfer.attributed(error), reactor: reactor)
            return
        }
        guard let easy = transfer.easy ?? EasyHandle() else {
            finish(
                transfer, with: DownloadError(code: .internalError, url: transfer.urlForErrors, detail: "curl_easy_init failed"),
                reactor: reactor)
            return
        }
        easy.configure(
            url: transfer.download.url.absoluteString,
            userAgent: configuration.userAgent,
            connectTimeoutMilliseconds: Int(configuration.connectTimeout.components.seconds * 1000),
            maximumRedirects: configuration.maximumRedirects,
            write: Scheduler.writeCallback,
            context: Unmanaged.passUnretained(transfer).toOpaque()
        )
        if transfer.revalidating {
            easy.setConditions(
                rangeFrom: 0, ifRange: nil, ifNoneMatch: transfer.record.entityTag,
                ifModifiedSince: transfer.record.entityTag == nil ? transfer.record.lastModified : nil)
        } else {
            easy.setConditions(rangeFrom: transfer.requestedOffset, ifRange: transfer.record.ifRangeValidator)
        }
        transfer.easy = easy
        transfer.headSeen = false
        transfer.writeError = nil
        let code = reactor.add(easy.raw)
        guard code == CURLM_OK else {
            transfer.easy = nil
            finish(
                transfer,
                with: DownloadError(
                    code: .internalError, url: transfer.urlForErrors,
                    detail: "curl_multi_add_handle failed: \(String(cString: curl_multi_strerror(code)))"),
                reactor: reactor)
            return
        }
        if !transfer.holdsSlot {
            transfer.holdsSlot = true
            active += 1
        }
        logger.debug(
            "request", metadata: ["url": "\(transfer.urlForErrors)", "from": "\(transfer.requestedOffset)"])
        transfer.download.hub.publish(.connecting(transfer.progress()))
    }

    private func acceptBody(for transfer: Transfer, total: Int64?, truncating: Bool, restart: RestartReason?) {
        guard let easy = transfer.easy, let sink = transfer.sink else { return }
        let head = transfer.responseHead(of: easy)
        do {
            if truncating {
                try sink.truncate()
                transfer.generation += 1
                transfer.record.bytesSynced = 0
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
        do {
            try transfer.store.save(transfer.record, for: transfer.id)
        } catch {
            transfer.writeError = transfer.attributed(error)
            return
        }
        transfer.download.hub.publish(.receiving(transfer.progress()))
    }

    private func complete(_ transfer: Transfer, reactor: Reactor) {
        stopRequest(of: transfer, reactor: reactor)
        guard let sink = transfer.sink else {
            place(transfer, reactor: reactor)
            return
        }
        // The file came through this process: write what is buffered, make the bytes durable (off the
        // loop thread), and only then rename them into place.
        do {
            try sink.close()
        } catch {
            transfer.sink = nil
            perform(transfer.machine.completionFailed(transfer.attributed(error)), for: transfer, reactor: reactor)
            return
        }
        transfer.sink = nil
        if transfer.record.totalBytes == nil { transfer.record.totalBytes = sink.committedLength }
        let id = transfer.id
        syncOffLoop(transfer.partialPath, reactor: reactor) { _ in .finalSynced(id) }
    }

    private func finalSynced(_ id: DownloadID, reactor: Reactor) {
        defer { syncReported(reactor: reactor) }
        if let transfer = transfers[id] { place(transfer, reactor: reactor) }
    }

    /// Moves a whole partial file to its destination (unless it is already there), records the
    /// completion and reports it.
    private func place(_ transfer: Transfer, reactor: Reactor) {
        let destination = transfer.download.destination
        if transfer.notModified {
            unlink(transfer.partialPath)  // the empty partial of the conditional request
        } else if Transfer.fileLength(transfer.partialPath) != nil, !transfer.destinationIsComplete || transfer.revalidating {
            do {
                try moveIntoPlace(from: transfer.partialPath, to: destination.path)
            } catch {
                perform(transfer.machine.completionFailed(transfer.attributed(error)), for: transfer, reactor: reactor)
                return
            }
        }
        let total = transfer.record.totalBytes ?? Transfer.fileLength(destination.path) ?? 0
        transfer.record.totalBytes = total
        checkpoint(transfer, state: .completed, bytes: total)
        unlink(transfer.partialPath)
        transfer.download.hub.publish(.progress(transfer.progressOfCompleted()))
        transfer.download.hub.publish(.completed(destination))
        forget(transfer)
    }

    /// Records where a download stands. A failure to write the journal is logged, not fatal: the
    /// partial file itself is what a resume trusts first.
    private func checkpoint(_ transfer: Transfer, state: DownloadRecord.State, bytes: Int64) {
        transfer.record.state = state
        transfer.record.bytesCommitted = bytes
        do {
            try transfer.store.save(transfer.record, for: transfer.id)
        } catch {
            logger.warning("could not write the journal", metadata: ["url": "\(transfer.urlForErrors)", "error": "\(error)"])
        }
    }

    /// Renames the finished partial file to its destination: the destination holds either its old
    /// content or the whole new file, never a part.
    private func moveIntoPlace(from source: String, to destination: String) throws(DownloadError) {
        let directory = (destination as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        if rename(source, destination) == 0 { return }
        let renameError = errno
        guard renameError == EXDEV else {
            throw DownloadError(
                code: .fileSystem, url: nil, errno: renameError, path: destination, detail: "rename into place failed")
        }
        // The state directory is on another file system: copy next to the destination, then rename.
        let temporary = "\(directory.isEmpty ? "." : directory)/.\((destination as NSString).lastPathComponent).haul-tmp"
        do {
            unlink(temporary)
            try FileManager.default.copyItem(atPath: source, toPath: temporary)
        } catch {
            unlink(temporary)
            throw DownloadError(code: .fileSystem, url: nil, errno: EXDEV, path: destination, detail: "copy across file systems failed")
        }
        guard rename(temporary, destination) == 0 else {
            let code = errno
            unlink(temporary)
            throw DownloadError(code: .fileSystem, url: nil, errno: code, path: destination, detail: "rename into place failed")
        }
        unlink(source)
    }

    /// Fails a download for a local reason outside its transfer (set-up errors).
    private func finish(_ transfer: Transfer, with error: DownloadError, reactor: Reactor) {
        perform(transfer.machine.fail(error), for: transfer, reactor: reactor)
    }

    /// Takes the request out of curl (if any) and frees the download's slot.
    private func stopRequest(of transfer: Transfer, reactor: Reactor) {
        if let easy = transfer.easy {
            reactor.remove(easy.raw)
            transfer.easy = nil
        }
        if transfer.holdsSlot {
            transfer.holdsSlot = false
            active -= 1
        }
    }

    private func forget(_ transfer: Transfer) {
        transfers.removeValue(forKey: transfer.id)
        onFinal(transfer.id)
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
        let decision = decision(for: transfer, head: head)
        if transfer.revalidating, case .alreadyComplete = decision { transfer.notModified = true }
        logger.debug(
            "response", metadata: ["url": "\(transfer.urlForErrors)", "status": "\(head.status)", "decision": "\(decision)"])
        return transfer.machine.responseReceived(decision)
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
        do {
            if try sink.append(bytes) {
                reportProgress(of: transfer)
            }
        } catch {
            transfer.writeError = transfer.attributed(error)
            return CURL_WRITEFUNC_ERROR
        }
        return bytes.count
    }

    private func reportProgress(of transfer: Transfer) {
        let now = DispatchTime.now().uptimeNanoseconds
        guard let sink = transfer.sink else { return }
        transfer.speed.record(bytes: sink.committedLength, at: now)
        guard now &- transfer.lastProgressAt >= progressIntervalNanoseconds else { return }
        transfer.lastProgressAt = now
        transfer.download.hub.publish(.progress(transfer.progress()))
    }
}

extension Transfer {
    /// Progress of a download whose file is whole.
    func progressOfCompleted() -> DownloadProgress {
        let total = record.totalBytes ?? Transfer.fileLength(download.destination.path) ?? 0
        return DownloadProgress(
            bytesReceived: total, totalBytes: total, bytesPerSecond: speed.bytesPerSecond, estimatedTimeRemaining: .zero)
    }
}

private let CURL_WRITEFUNC_ERROR = Int(0xFFFF_FFFF)
