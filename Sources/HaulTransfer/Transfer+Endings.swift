import Dispatch
import FoundationEssentials
import Glibc
import HaulValues

/// How a transfer leaves the loop: paused, waiting to retry, failed, cancelled or completed. Each
/// ending is the transfer's own teardown (its requests stopped, its sink closed, its row written or
/// removed, its event published); the scheduler then frees its slot (``Scheduler/leave(_:)``).
extension Transfer {
    /// Paused by the user, or interrupted by a shutdown (the next manager continues it): the row
    /// says so and `.paused` is published. Returns its progress, whose bytes the scheduler syncs.
    func endPaused(interrupted: Bool) -> DownloadProgress {
        let progress = stopAndRecord(interrupted ? .interrupted : .paused)
        if interrupted, stream != nil {
            // A stream continues within its process only: no later manager takes its row up.
            store.remove(id)
        }
        events.publish(.paused(progress))
        return progress
    }

    /// Waits to retry at `time` (seconds since 1970), `delay` from now, after `error`: the row says
    /// so and `.waitingToRetry` is published. Returns its progress, whose bytes the scheduler syncs.
    func endWaitingToRetry(after error: DownloadError, delay: Duration, at time: Double) -> DownloadProgress {
        spanFailed(error)
        record.failures = machine.failures
        let progress = stopAndRecord(.retryScheduled(at: time, error: error.description))
        log(.debug, "retrying", metadata: ["haul.after": "\(delay)", "haul.error": "\(error)"])
        environment.metrics.retries.increment()
        // The bytes kept, which the last progress event (one per progress interval) may not show yet.
        events.publish(.progress(progress))
        events.publish(.waitingToRetry(error, after: delay))
        return progress
    }

    /// Failed with `error`: the row says failed and why (a listing shows it: a 404, a refused
    /// port), with the partial file when it holds bytes (a failure before any says none is kept);
    /// what was refused at the partial's name (a link, a FIFO) is left there. A stream's or a
    /// discarded body's row goes, as when it completes: nothing of it is left to find again.
    func endFailed(_ error: DownloadError) {
        var error = error
        error.decodedFromStart = environment.easyHandles.options.decodesCompression
        spanFailed(error)
        stopAll()
        try? sink?.close()
        sink = nil
        let bytes = bytesOnDisk
        if bytes == 0, error.code != .unsafeFile {
            error.nothingKept = true
            if let partialPath { unlink(partialPath) }  // empty (or only preallocated): nothing to resume from
        }
        if stream != nil, error.code != .unsafeFile {
            store.remove(id)
        } else {
            recordRow(after: .failed(error: error.description), bytes: bytes)
        }
        log(.debug, "download failed", metadata: ["haul.error": "\(error)"])
        environment.metrics.failed(error.code).increment()
        events.publish(.failed(error))
    }

    /// Cancelled: its requests stopped, its partial file removed, its row saying cancelled (a
    /// stream's goes), `.cancelled` published.
    func endCancelled() {
        stopAll()
        sink = nil
        // Its partial file goes: a sync still running for it describes no bytes of its next one.
        environment.syncs.truncated(id)
        if stream != nil {
            store.remove(id)
        } else {
            record.apply(.cancelled)
            do {
                try store.recordCancelled(record, for: id)
            } catch {
                log(.warning, "could not write the journal", metadata: ["haul.error": "\(error)"])
            }
        }
        events.publish(.cancelled)
    }

    /// Its file is in place (`placed`): the row says completed, with the file's length and time, and
    /// the last progress and `.completed` are published.
    func endCompleted(_ placed: PlacedFile) {
        if let path = placed.path {
            // Named by the server, and someone else's file took the name meanwhile: it went beside.
            record.destination = path
            download.update(destinationPath: path)
        }
        let total = record.totalBytes ?? placed.length
        record.totalBytes = total
        record.placedModificationTime = placed.modificationTime
        if stream != nil {
            // Nothing of it is left to find again (a stream's bytes went to their reader): its row
            // goes, so that thousands of streams or discarded bodies leave no rows behind.
            store.remove(id)
        } else {
            recordRow(after: .completed, bytes: total)
        }
        events.publish(
            .progress(
                DownloadProgress(
                    bytesReceived: total,
                    totalBytes: total,
                    bytesPerSecond: speed.bytesPerSecond,
                    estimatedTimeRemaining: .zero
                )
            )
        )
        environment.metrics.completed.increment()
        environment.metrics.duration.recordNanoseconds(DispatchTime.now().uptimeNanoseconds - admittedAt)
        events.publish(.completed(download.destination))
    }
}

extension Transfer {
    /// The bytes this attempt took the file past the length it had when the attempt's first request
    /// was made (``lengthAtAttemptStart``): over all its connections, a restart from zero within
    /// the attempt not counted; 0 before a request was made. An attempt progressed when this is
    /// above 0 (its failures then do not use the retry budget up).
    var bytesThisAttempt: Int64 {
        guard let start = lengthAtAttemptStart else { return 0 }
        return max(0, (segmentedBytes ?? sink?.receivedLength ?? start) - start)
    }

    /// The part of ``bytesThisAttempt`` already in the file: not what the sink still buffers.
    var bytesWrittenThisAttempt: Int64 {
        guard let start = lengthAtAttemptStart else { return 0 }
        return max(0, (segmentedBytes ?? sink?.committedLength ?? start) - start)
    }

    /// Carries out what its machine's `action` asks of it beyond requests and bodies (which
    /// ``perform(_:)`` did): an ending, or what its owner is to do. `interruptedByShutdown`: a pause
    /// is the manager's shutdown, and the next manager continues the download. A transfer that
    /// leaves its slot frees the name it claimed (``leftSlot()``).
    func slotAction(for action: DownloadStateMachine.Action, interruptedByShutdown: Bool = false) -> SlotAction {
        let slotAction = carryOut(action, interruptedByShutdown: interruptedByShutdown)
        switch slotAction {
        case .paused, .end, .retry: leftSlot()
        case .none, .askForHeaders, .askForFreshURL, .finish, .finishStream, .openConnections, .answered, .leftHost:
            break
        }
        return slotAction
    }

    /// The name it chose in a folder and claimed while it ran is free for other transfers again:
    /// its row holds it now (paused, waiting to retry, completed, failed), or it has no row.
    private func leftSlot() {
        // A name is claimed only by a download into a folder (its caller named no file).
        if record.folder != nil { environment.claimedNames.remove(record.destination) }
    }

    private func carryOut(_ action: DownloadStateMachine.Action, interruptedByShutdown: Bool) -> SlotAction {
        switch action {
        case .none, .startRequest, .tryNextURL:
            return .none
        case .askForHeaders:
            // What the provider is told: its URL as its row holds it (credentials removed).
            return .askForHeaders(
                HeadersQuestion(
                    names: record.headerNames,
                    url: URL(string: record.url) ?? download.url,
                    destination: download.destination,
                    urlForErrors: urlForErrors
                )
            )
        case .refreshURL(let cause):
            // What the refresher is told: the URL in use, credentials removed.
            return .askForFreshURL(
                FreshURLQuestion(
                    cause: cause,
                    url: URL(string: download.url.redactedString) ?? download.url,
                    destination: download.destination,
                    urlForErrors: urlForErrors
                )
            )
        case .pause:
            return .paused(sync: checkpoint(bytes: endPaused(interrupted: interruptedByShutdown).bytesReceived))
        case .cancel:
            endCancelled()
            return .end
        case .fail(let error):
            endFailed(error)
            return .end
        case .retry(let error):
            // The backoff after its failures, or the last answer's `Retry-After`; at once after a
            // connection cut mid-body.
            let delay = environment.retryPolicy.delay(
                afterFailures: machine.failures,
                retryAfter: request.retryAfter,
                random: Double.random(in: 0..<1),
                // (A full disk is not the server's failure: its retry backs off whatever was served.)
                served: bytesThisAttempt >= RetryPolicy.servedAttempt && error.category != .localFiles
            )
            let time = clock.wallSeconds + delay.inSeconds
            let bytes = endWaitingToRetry(after: error, delay: delay, at: time).bytesReceived
            return .retry(at: time, sync: checkpoint(bytes: bytes), restarts: machine.restarts)
        case .received where stream != nil:
            // Written through: it completes once the reader took every byte.
            stopAll()
            return .finishStream
        case .received:
            return .finish(finishJob(keepingDestination: false))
        case .keepDestination:
            // The server said the file there is current (304): complete already.
            download.foundComplete.store(true, ordering: .relaxed)
            return .finish(finishJob(keepingDestination: true))
        }
    }

    /// The disk lanes placed its file (or failed to): it completes, or goes on as the failure says.
    func placed(_ outcome: Result<PlacedFile, DownloadError>) -> SlotAction {
        switch outcome {
        case .failure(let error):
            return slotAction(for: perform(machine.completionFailed(error)))
        case .success(let file):
            machine.placed()
            endCompleted(file)
            leftSlot()
            return .end
        }
    }
}
