import CHaul
import FoundationEssentials
import Glibc
import HaulIO
import HaulScheduler
import HaulValues
import Logging
import Tracing

/// A request's journal row: what asking for a download does to it.
extension DownloadQueue {
    /// What asking for a download did to its journal row.
    enum QueueOutcome {
        /// Queued now (new, or paused, interrupted or failed before, or to be fetched again).
        case queued(JournalRow)
        /// Already queued or running.
        case waiting(JournalRow)
        /// Queued or running for another manager (another process, mostly): followed to its
        /// outcome (``SchedulerCommand/follow(_:_:)``), not fetched again.
        case following(JournalRow)
        /// The destination holds the complete file.
        case complete(JournalRow)
    }

    /// Writes the journal row a request asks for, on the loop (``RowWrite``), and keeps what the row
    /// does not hold.
    ///
    /// - Parameters:
    ///   - context: the caller's service context when it asked (its trace).
    ///   - rowsExist: whether the last request's row existed already, which makes this one's likely
    ///     too (a list run again): it is looked up before an insertion is tried. Updated.
    func writeRow(
        for request: PreparedRequest,
        context: ServiceContext?,
        in writing: inout RowWriting,
        rowsExist: inout Bool
    ) throws(HaulValues.DownloadError) -> QueueOutcome {
        let journal = writing.journal
        if request.stream != nil, writing.given(request.id)?.stream != nil,
            let record = try journal.record(for: request.id), record.isUnfinished
        {
            // The same stream asked for again while its download runs: that one goes on (the
            // descriptor opened for this request is closed with it).
            return .waiting(record)
        }
        writing.give(request.given(context: context), for: request.id)
        if request.stream != nil {
            // A stream starts from its first byte in each process: bytes written to it by another
            // cannot be continued (its row is in memory, this process's alone).
            return .queued(try saveFresh(request, in: journal))
        }
        // Rows hold URLs without their user name and password (they never reach the disk).
        let urlText = request.url.redactedString
        var existing = rowsExist ? try journal.record(for: request.id) : nil
        if existing == nil {
            // A download never seen: one insertion, no lookup.
            if let record = try insertNew(request, in: &writing, url: urlText) {
                rowsExist = false
                return .queued(record)
            }
            existing = try journal.record(for: request.id)
        }
        rowsExist = true
        if var record = existing, Journal.owned(record.state) {
            if let followed = try followedOrTakenBack(&record, for: request, in: journal) {
                return .following(followed)
            }
            existing = record
        }
        if let record = existing, !Self.isSameDownload(record, as: request, url: urlText) {
            if let partial = journal.partialPath(for: request.id) { unlink(partial) }
            existing = nil
        }
        guard var record = existing else {
            return .queued(try saveFresh(request, in: journal))
        }
        if record.url != urlText {
            // The same download asked for from another URL (a refreshed signed link, a mirror). The
            // row keeps the URL its bytes came from until an answer of the new one is accepted; its
            // bytes continue only if that answer proves the same file (``ResumePlan``: its overlap
            // with the bytes on disk, and the recorded validator).
            record.host = request.url.hostKey
            writing.give(newURL: request.url, for: request.id)
            catalog.existingHandle(request.id)?.update(url: request.url)
        }
        request.setRequested(in: &record)
        if record.state != .completed {
            try request.takeChecks(
                into: &record,
                placing: writing.isFinishing(request.id),
                heldByCaller: catalog.existingHandle(request.id)?.hasCallerHandle ?? false
            )
        }
        switch record.apply(.requested(sequence: catalog.nextQueueSequence())) {
        case .moves:
            try journal.save(record, for: request.id)
            return .queued(record)
        case .unchanged:  // already queued, waiting or running
            try journal.save(record, for: request.id)
            writing.noteAsked(request.id, record)
            return .waiting(record)
        case .refused:
            return try completedOutcome(record, for: request, in: journal)
        }
    }

    /// A row another manager holds: what that manager's download is asked for now, when it still
    /// runs (its outcome is this request's too; what this request asks for goes with it, for the
    /// row's taking back if that manager stops); else nil, and the row taken back (killed,
    /// crashed: with the bytes it left).
    private func followedOrTakenBack(
        _ record: inout JournalRow,
        for request: PreparedRequest,
        in journal: Journal
    ) throws(HaulValues.DownloadError) -> JournalRow? {
        let holder = try journal.standing(of: request.id)?.owner
        if journal.isAnotherLiveOwner(holder) {
            var asked = record
            request.setRequested(in: &asked)
            try request.takeChecks(into: &asked, placing: false, heldByCaller: false)
            return asked
        }
        if holder != journal.owner { record.apply(.interrupted) }
        return nil
    }

    /// Whether `record` is the download `request` asks for. Not for another destination under the
    /// same id (a 128-bit collision), nor for a finished file that another URL is to replace: a new
    /// download, whose partial file is not that one's. (A download into a folder is its URL or its
    /// caller's key: a finished one asked for under the same key from another URL, a signed link
    /// refreshed, is the same file.)
    private static func isSameDownload(_ record: JournalRow, as request: PreparedRequest, url urlText: String)
        -> Bool
    {
        if record.folder != request.folder { return false }
        guard record.folder == nil else { return true }
        return record.destination == request.destination && (record.url == urlText || record.state != .completed)
    }

    /// The row of a download never seen, inserted unless another process inserted it first (nil
    /// then). A partial left by a journal that is gone, a file this URL's download placed (its row
    /// lost), or a file found that the request continues give it its bytes.
    private func insertNew(
        _ request: PreparedRequest,
        in writing: inout RowWriting,
        url urlText: String
    ) throws(HaulValues.DownloadError) -> JournalRow? {
        let journal = writing.journal
        var record = fresh(request)
        if let length = journal.adoptOrphanPartial(for: request.id) {
            // A partial left by a journal that is gone: nothing vouches for its bytes but the
            // overlap its resume checks.
            record.bytesCommitted = length
            writing.provesByOverlap(request.id)
        } else if let origin = recordedOrigin(of: request, url: urlText) {
            // A file this URL's download placed, its row lost (the state folder deleted or
            // damaged): complete if the server still has that version (a conditional request),
            // else fetched as for a file Haul does not know.
            record.entityTag = origin.entityTag
            record.lastModified = origin.lastModified
            record.totalBytes = origin.length
            record.bytesCommitted = origin.length
            record.state = .completed
            _ = record.apply(.revalidationRequested(sequence: catalog.nextQueueSequence()))
        }
        guard try journal.insertIfAbsent(record, for: request.id) else { return nil }
        // Only for a row that is new: an existing one's partial file is Haul's own.
        if record.bytesCommitted == 0, let length = continueFound(request, in: journal) {
            record.bytesCommitted = length
            try journal.save(record, for: request.id)
        }
        return record
    }

    /// A request for a download whose row is completed: the file stays unless it is gone or
    /// changed, or is to be revalidated.
    private func completedOutcome(
        _ completed: JournalRow,
        for request: PreparedRequest,
        in journal: Journal
    ) throws(HaulValues.DownloadError) -> QueueOutcome {
        var record = completed
        // The file the request found at its destination, when it is the one the row describes;
        // else looked at now: the download may have placed it since (a row into a folder names
        // its own file).
        let intact = { (file: PlacedFile?) in
            PlacedFile.isIntact(file, length: record.totalBytes, modificationTime: record.placedModificationTime)
        }
        guard
            (record.destination == request.destination && intact(request.found))
                || intact(PlacedFile.at(record.destination)),
            request.expectedSize == nil || request.expectedSize == record.totalBytes,
            request.checksum == nil || hasChecksum(record.destination, request)
        else {
            // The file recorded as complete is gone or changed at its destination, or does not
            // have the size or checksum asked for (the record was stale): fetch it anew; the final
            // check decides.
            if let partial = journal.partialPath(for: request.id) { unlink(partial) }
            return .queued(try saveFresh(request, in: journal))
        }
        guard revalidatesCompletedFiles, record.entityTag != nil || record.lastModified != nil,
            record.apply(.revalidationRequested(sequence: catalog.nextQueueSequence())) != .refused
        else {
            return .complete(record)
        }
        try journal.save(record, for: request.id)
        return .queued(record)
    }

    /// The version recorded on the file found at the request's destination (``FileOrigin``), when
    /// it is this URL's file of that length and nothing asks for it to be treated otherwise (a
    /// continued file, a checksum, which decides by the bytes).
    private func recordedOrigin(of request: PreparedRequest, url: String) -> FileOrigin? {
        guard recognizesPlacedFiles, let found = request.found, !request.continuesFound, request.checksum == nil,
            request.expectedSize == nil || request.expectedSize == found.length, request.stream == nil,
            let origin = FileOrigin.read(at: request.destination), origin.describes(url: url, file: found)
        else { return nil }
        return origin
    }

    /// Whether the file at `path` has the request's checksum: hashed when the request was checked
    /// if it was found there then, else now (a download into a folder names its own file).
    private func hasChecksum(_ path: String, _ request: PreparedRequest) -> Bool {
        guard let checksum = request.checksum else { return true }
        if path == request.destination, let found = request.foundHasChecksum { return found }
        return (try? checksum.digest(ofFileAt: path)) == checksum.hex
    }

    /// A new row for the request, queued at the end of its priority.
    func fresh(_ request: PreparedRequest) -> JournalRow {
        var record = JournalRow(url: request.url.redactedString, destination: request.destination)
        record.queueSequence = catalog.nextQueueSequence()
        record.host = request.url.hostKey
        record.expectedChecksum = request.checksum?.description
        record.expectedSize = request.expectedSize
        record.folder = request.folder
        request.setRequested(in: &record)
        return record
    }

    /// Replaces the request's row with a new one.
    func saveFresh(_ request: PreparedRequest, in journal: Journal) throws(HaulValues.DownloadError) -> JournalRow {
        var record = fresh(request)
        if let length = continueFound(request, in: journal) { record.bytesCommitted = length }
        try journal.save(record, for: request.id)
        return record
    }

    /// For a new row of a request that continues the file found at its destination
    /// (``DownloadRequest/continuesExistingFile``): that file's bytes copied into the partial file
    /// (shared extents where the file system can), their count; `nil` when nothing is continued, a
    /// partial file is there already (Haul's own bytes are never replaced by the file's), or the
    /// copy failed (the download then fetches the file whole; the file stays as it is).
    private func continueFound(_ request: PreparedRequest, in journal: Journal) -> Int64? {
        guard request.continuesFound, let partial = journal.partialPath(for: request.id) else { return nil }
        let source = open(request.destination, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard source >= 0 else { return nil }
        defer { close(source) }
        var status = stat()
        guard fstat(source, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_size > 0,
            let target = try? PrivateFile.open(partial, O_WRONLY | O_CREAT | O_EXCL), target >= 0
        else { return nil }
        defer { close(target) }
        let length = Int64(status.st_size)
        guard CHaul_copy_file(source, target, length) == length else {
            unlink(partial)
            return nil
        }
        return length
    }

    /// Shows an outcome on the download's handle: the live one, or (when `creatingHandle`) a new
    /// one, `made` when the caller made it. On the loop, so that its next event for it comes after.
    func publish(
        _ outcome: QueueOutcome,
        for request: PreparedRequest,
        in journal: Journal,
        creatingHandle: Bool,
        made: LiveDownload? = nil
    ) -> LiveDownload? {
        let record: JournalRow
        switch outcome {
        case .queued(let r), .waiting(let r), .following(let r), .complete(let r): record = r
        }
        let progress = record.progress
        let download: LiveDownload
        let isNew: Bool
        let foundComplete = if case .complete = outcome { true } else { false }
        if creatingHandle {
            (download, isNew) = catalog.handle(request.id) {
                // A download into a folder shows the file it chose, once it chose one.
                made ?? makeHandle(for: request, destinationPath: record.destination, progress: progress)
            }
        } else if foundComplete && catalog.feed.hasSubscribers {
            // Found complete while someone follows the feed: a handle (released once they read it)
            // tells them, with ``Download/wasAlreadyComplete``, as a caller of `download(…)` is told.
            // The catalog does not keep it (its download ends with these events, and the catalog
            // replaces an ended handle anyway): no weak reference, whose side table cost an
            // allocation per row and a slower release on the reader's thread, on a rerun of
            // 100,000 finished URLs.
            if let live = catalog.existingHandle(request.id), !live.hub.isClosed {
                (download, isNew) = (live, false)
            } else {
                (download, isNew) = (
                    makeHandle(for: request, destinationPath: record.destination, progress: progress), true
                )
            }
        } else if let live = catalog.existingHandle(request.id) {
            (download, isNew) = (live, false)
        } else {
            // No handle shows it: the manager's feed hears of a queued row from here (or of one
            // another manager runs, which this one now waits for).
            let waits =
                switch outcome {
                case .queued, .following: true
                case .waiting, .complete: false
                }
            if waits, catalog.feed.hasSubscribers {
                catalog.feed.publish(
                    FeedEvent(
                        id: request.id,
                        destinationPath: record.destination,
                        event: .queued,
                        download: nil
                    )
                )
            }
            return nil
        }
        switch outcome {
        case .queued:
            download.hub.publish(.queued)
        case .waiting(let record), .following(let record):
            guard isNew else { break }
            switch record.state {
            case .paused, .interrupted: download.hub.publish(.paused(progress))
            default: download.hub.publish(.queued)
            }
        case .complete(let record):
            download.foundComplete.store(true, ordering: .relaxed)
            let total = record.totalBytes ?? 0
            download.hub.publish(
                .progress(
                    HaulValues.DownloadProgress(bytesReceived: total, totalBytes: total, estimatedTimeRemaining: .zero)
                )
            )
            download.hub.publish(.completed(URL(fileURLWithPath: record.destination, isDirectory: false)))
        }
        return download
    }

    func makeHandle(
        for request: PreparedRequest,
        destinationPath: String? = nil,
        progress: HaulValues.DownloadProgress
    ) -> LiveDownload {
        catalog.makeHandle(
            request.id,
            url: request.url,
            destinationPath: destinationPath ?? request.destination,
            stateDirectoryPath: request.stateDirectory,
            progress: progress,
            controller: inbox,
            // A body in memory's handle is the manager's own (``DownloadManager/data(from:headers:maximumSize:)``
            // waits for its end): nobody subscribes to it early.
            keepsEarlyEvents: request.stream?.collector == nil
        )
    }
}
