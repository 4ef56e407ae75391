import HaulIO
import HaulValues

/// The transfer's journal row: written when the download's state changes, when a response's
/// validators must precede its bytes, and at checkpoints.
extension Transfer {
    /// Records where the download stands after `event` (the row's machine decides the state). A
    /// failure to write the journal is logged, not fatal: the partial file itself is what a resume
    /// trusts first.
    func recordRow(after event: QueueEvent, bytes: Int64) {
        record.apply(event)
        record.bytesCommitted = bytes
        if let map = committedMap { record.segments = map.encoded }
        writeRow()
    }

    /// Writes the row as it stands (it is no longer behind). A failure is logged, not fatal: the
    /// partial file itself is what a resume trusts first.
    func writeRow() {
        _ = machine.rowWritten()
        sink?.beforeFirstWrite = nil
        do {
            try store.update(record, for: id, at: rowID)
        } catch {
            log(
                .warning,
                "could not write the journal",
                metadata: ["haul.error": "\(error)"]
            )
        }
    }

    /// Writes the row that ``acceptBody(total:truncating:restart:)`` left for later: whether it could
    /// (a failure fails the body).
    @discardableResult
    func catchUpRow() -> Bool {
        guard machine.rowWritten() else { return true }
        do {
            try store.update(record, for: id, at: rowID)
            return true
        } catch {
            bodyFailed(attributed(error))
            return false
        }
    }

    /// A caller asked for the download again while it runs (``TransferInput/asked(_:)``): what the
    /// request sets in the row (``JournalRow/takeRequest(of:)``: the checks its file must pass too)
    /// is its own row's from now on, or its next save would write the earlier request's back, and
    /// its file would be placed without the checksum or size the latest caller asked for. (The
    /// URL is not taken: the row keeps the one its bytes came from, ``followURL()``.)
    func adoptAsked(_ row: JournalRow) {
        if row.maxBytesPerSecond != record.maxBytesPerSecond {
            environment.rateLimiter.setLimit(row.maxBytesPerSecond, for: self)
        }
        record.takeRequest(of: row)
    }

    /// The row takes the URL whose answer was accepted (a caller may have asked for the download
    /// from another URL since the partial's bytes were written): without its user name and password,
    /// as always on disk. Until then the row keeps the URL its bytes came from, so that a change is
    /// seen, and checked (``ResumePlan``), by the next request, in this process or the next. The URL
    /// is the one the request asked, not the handle's now: a caller who asks for another while the
    /// answer is on its way has it asked at the next attempt.
    func followURL() {
        let url = request.asked ?? download.url
        let stored = url.redactedString
        guard record.url != stored else { return }
        record.url = stored
        record.host = url.hostKey
    }

    /// Stops the transfer for now (paused, interrupted, or waiting to retry): writes what is buffered
    /// and records the row after `event` with the bytes on disk. Returns them, as progress; the owner
    /// syncs them.
    func stopAndRecord(_ event: QueueEvent) -> DownloadProgress {
        stopAll()
        returnToProvenURL()
        do {
            try sink?.close()
        } catch {
            log(
                .debug,
                "could not write buffered bytes",
                metadata: ["haul.error": "\(error)"]
            )
        }
        sink = nil
        speed.reset()
        let progress = progress()
        recordRow(after: event, bytes: progress.bytesReceived)
        return progress
    }

    /// Hands buffered bytes to the kernel and records them (``checkpointReceiving()``). Returns the
    /// bytes to sync, or `nil` when the download is not receiving or its write failed (the write
    /// callback meets the same error and fails the download).
    func receivedBytesToSync() -> Int64? {
        guard case .receiving = machine.state, let sink else { return nil }
        do {
            try sink.flush()
            for connection in segments?.others ?? [] { try connection.sink?.flush() }
        } catch {
            return nil
        }
        let bytes = segmentedBytes ?? sink.committedLength
        recordRow(after: .progressed, bytes: bytes)
        return bytes
    }

    /// The download's bytes are all received: the job that writes what is still buffered, makes the
    /// bytes durable, checks them and only then renames them into place (or, for an unchanged file,
    /// keeps the destination), for the disk thread.
    func finishJob(keepingDestination: Bool) -> FinishJob {
        // A body into a stream completes once its reader took it (``finishStream(_:)``), and only
        // such a body has no partial file.
        guard let partialPath else { preconditionFailure("a body into a stream is never placed as a file") }
        stopAll()
        if let total = segments?.map.total {
            // Every segment is whole: the row's map has nothing more to say.
            record.totalBytes = total
            (segments, own.segment) = (nil, nil)
            record.segments = nil
        }
        var remainder: PartialRemainder?
        if let sink {
            self.sink = nil
            if record.totalBytes == nil { record.totalBytes = sink.receivedLength }
            remainder = sink.handOff()
            // A whole file in its buffer is the disk thread's to write, unless the buffers are
            // nearly all in use (waiting on the disk thread): then the loop writes it and frees
            // its buffer now, so that receiving transfers still find one. (At half, with a buffer
            // per slot, the loop wrote nearly every small file itself: 7 % of its time.)
            let buffers = environment.buffers
            if machine.rowBehind, buffers.inUseCount >= buffers.limit - buffers.limit / 8,
                let written = remainder?.writtenNameless(in: FilePath.directory(of: partialPath))
            {
                remainder = written
            }
        }
        return FinishJob(
            id: id,
            partialPath: partialPath,
            destination: download.destinationPath,
            remainder: remainder,
            writeWhole: machine.rowBehind,
            keepDestination: keepingDestination,
            expectedSize: record.expectedSize,
            expectedChecksum: record.expectedChecksum.flatMap(Checksum.init),
            url: urlForErrors,
            modificationTime: environment.setsModificationTimeFromServer
                ? record.lastModified.flatMap(HTTPDate.parse)?.timeIntervalSince1970 : nil,
            origin: record.totalBytes.map {
                FileOrigin(url: record.url, entityTag: record.entityTag, lastModified: record.lastModified, length: $0)
            },
            replaces: record.movesPastFilesFound
                ? .ownOnly(placedModificationTime: record.placedModificationTime) : .any,
            journal: store,
            confinedTo: confinedTo
        )
    }
}
