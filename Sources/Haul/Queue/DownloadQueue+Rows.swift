import FoundationEssentials
import Glibc
import Logging
import Tracing

/// A request's journal row: what asking for a download does to it.
extension DownloadQueue {
    /// A request checked and resolved to its id and state directory.
    struct PreparedRequest {
        var url: URL
        var destination: String
        var id: DownloadID
        var stateDirectory: String
        var priority: Int
        var checksum: Checksum? = nil
        var expectedSize: Int64? = nil
        var userAgent: String? = nil
        /// Its own headers (the manager's defaults are added when it is sent).
        var headers: [DownloadHeader] = []
        /// The folder, for a download that takes its file name from the server (`destination` is
        /// then the folder too, until the name is chosen).
        var folder: String? = nil
        /// Other URLs of the file.
        var mirrors: [URL] = []
        /// Its own rate limit.
        var maxBytesPerSecond: Int64? = nil
        /// Its own number of connections.
        var connections: Int? = nil
        /// Its own logger.
        var logger: Logger? = nil
        /// The file at `destination` when the request was checked (`nil`: none, or a folder): what
        /// tells a row recorded complete whether its file is still there, without a second `stat`.
        var found: PlacedFile? = nil
        /// Whether the file found there has the request's checksum, when one was asked for: hashed
        /// when the request was checked, before the journal is locked (`nil`: not hashed).
        var foundHasChecksum: Bool? = nil
        /// The stream the body goes to, when the destination is not a regular file.
        var stream: StreamTarget? = nil
        /// A file that appears at the destination meanwhile is kept (``DownloadRequest/replacesExistingFile``).
        var keepsExistingFile = false

        /// Its URL and its mirrors, in order; empty without mirrors.
        var allURLs: [URL] { mirrors.isEmpty ? [] : [url] + mirrors }

        /// Sets what the latest request for a download decides in its row, new or existing: its
        /// priority, user agent, header names, URLs, rate limit and connections.
        func setRequested(in record: inout DownloadRecord) {
            record.priority = priority
            record.userAgent = userAgent
            record.headerNames = headers.map(\.name)
            record.mirrors = allURLs.map(\.redactedString)
            record.maxBytesPerSecond = maxBytesPerSecond
            record.connections = connections
            record.keepsExistingFile = keepsExistingFile
        }
    }

    /// What asking for a download did to its journal row.
    enum QueueOutcome {
        /// Queued now (new, or paused, interrupted or failed before, or to be fetched again).
        case queued(DownloadRecord)
        /// Already queued or running.
        case waiting(DownloadRecord)
        /// The destination holds the complete file.
        case complete(DownloadRecord)
    }

    /// The state folder `path` is in, if it is in one: the configured state directory, or a folder
    /// named `.haul` (the name of every default state directory) on its way.
    static func stateFolder(holding path: String, configured: String?) -> String? {
        if let configured,
            path == configured || path.hasPrefix(configured.hasSuffix("/") ? configured : configured + "/")
        {
            return configured
        }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard let index = parts.firstIndex(where: { $0 == ConfinedPath.stateFolderName }) else { return nil }
        return parts[...index].joined(separator: "/")
    }

    func prepare(_ request: DownloadRequest) throws(DownloadError) -> PreparedRequest {
        let url = try Self.validate(request.url)
        try DownloadHeader.check(request.headers, url: url.redactedString)
        var mirrors: [URL] = []
        for mirror in request.mirrors { mirrors.append(try Self.validate(mirror)) }
        var destination = request.destinationPath
        var status = stat()
        var exists = destination.withCString { lstat($0, &status) } == 0
        // A descriptor of this process named through /dev/stdout, /dev/fd/N or /proc/self/fd/N.
        var inherited: Int32?
        if exists, (status.st_mode & S_IFMT) == S_IFLNK {
            inherited = FilePath.inheritedDescriptor(of: destination)
            // A symbolic link is followed, as curl, wget and aria2c write through one: the file is
            // placed (by rename, whole) at its target, and the link stays. The id stays the link's.
            guard let target = FilePath.linkTarget(of: destination) else {
                throw DownloadError(
                    code: .fileSystem,
                    url: url.redactedString,
                    errno: ELOOP,
                    path: destination,
                    detail: "the destination is a symbolic link that cannot be followed"
                )
            }
            // What is there, as the kernel follows the link (/proc's links to pipes included).
            exists = destination.withCString { stat($0, &status) } == 0
            if inherited == nil, !exists || [S_IFREG, S_IFDIR].contains(status.st_mode & S_IFMT) {
                destination = target
            }
        }
        let type = status.st_mode & S_IFMT
        var stream: StreamTarget?
        if exists, !request.takesFileNameFromServer, type != S_IFDIR,
            inherited != nil || [S_IFCHR, S_IFIFO, S_IFSOCK].contains(type)
        {
            // Written through, in order, and never replaced (as root, -o /dev/null was): a
            // character device, a FIFO (opened now: it waits for its reader, as with curl), a
            // socket, standard output.
            guard request.checksum == nil else {
                throw DownloadError(
                    code: .unsupportedDestination,
                    url: url.redactedString,
                    path: destination,
                    detail:
                        "\(FilePath.kind(of: status.st_mode)), and a checksum is checked on a whole file before it is "
                        + "placed, never on bytes written to a stream"
                )
            }
            stream = try StreamTarget.open(
                path: destination,
                status: status,
                inherited: inherited,
                url: url.redactedString
            )
        } else if exists, !request.takesFileNameFromServer, type != S_IFREG, type != S_IFDIR {
            // A block device is never written, nor replaced by a file.
            throw DownloadError(
                code: .unsupportedDestination,
                url: url.redactedString,
                path: destination,
                detail: "\(FilePath.kind(of: status.st_mode)), which Haul never writes to"
            )
        }
        if request.takesFileNameFromServer, exists, (status.st_mode & S_IFMT) != S_IFDIR {
            throw DownloadError(
                code: .fileSystem,
                url: url.redactedString,
                errno: ENOTDIR,
                path: destination,
                detail: "a download that takes its name from the server needs a folder"
            )
        }
        if !request.takesFileNameFromServer, exists, (status.st_mode & S_IFMT) == S_IFDIR {
            throw DownloadError(
                code: .fileSystem,
                url: url.redactedString,
                errno: EISDIR,
                path: destination,
                detail: "the destination is a directory; give a file path inside it"
            )
        }
        let stateDirectory: String
        if let configured = configuredStateDirectory {
            stateDirectory = configured
        } else if stream != nil {
            // Nothing beside a device: a stream's row lives for this process only.
            stateDirectory = streamStateDirectory
        } else {
            let folder = request.takesFileNameFromServer ? destination : FilePath.directory(of: destination)
            stateDirectory = DownloadManager.defaultStateDirectory(besideFolder: folder)
        }
        if stream == nil, let state = Self.stateFolder(holding: destination, configured: configuredStateDirectory) {
            // The journal and the partial files are Haul's: a body written over one of them (an
            // input line's out=.haul/journal.sqlite) would take the place of the state itself.
            throw DownloadError(
                code: .unsupportedDestination,
                url: url.redactedString,
                path: destination,
                detail: "inside the state directory '\(state)', where Haul keeps its journal and partial files"
            )
        }
        return PreparedRequest(
            url: url,
            destination: destination,
            id: request.id,
            stateDirectory: stateDirectory,
            priority: request.priority,
            checksum: request.checksum,
            expectedSize: request.expectedSize,
            userAgent: request.userAgent,
            headers: request.headers,
            folder: request.takesFileNameFromServer ? destination : nil,
            mirrors: mirrors,
            maxBytesPerSecond: request.maxBytesPerSecond,
            connections: stream != nil ? 1 : request.connections.map { min(64, max(1, $0)) },
            logger: request.logger,
            found: exists && (status.st_mode & S_IFMT) == S_IFREG
                ? PlacedFile(length: Int64(status.st_size), modificationTime: PlacedFile.modificationTime(of: status))
                : nil,
            // A checksum is checked, not remembered: a file already there is hashed again (a file
            // corrupted in place keeps its length and mtime), outside the journal's lock.
            foundHasChecksum: request.checksum.flatMap { checksum in
                guard exists, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
                return (try? Checksum.digest(ofFileAt: destination, algorithm: checksum.algorithm)) == checksum.hex
            },
            stream: stream,
            keepsExistingFile: !request.replacesExistingFile
        )
    }

    /// Writes the journal row a request asks for. Call with the journal locked.
    ///
    /// - Parameter rowsExist: whether the last request's row existed already, which makes this one's
    ///   likely too (a list run again): it is looked up before an insertion is tried. Updated.
    func writeRow(
        for request: PreparedRequest,
        in journal: Journal,
        rowsExist: inout Bool
    ) throws(DownloadError) -> QueueOutcome {
        if request.stream != nil, catalog.rememberedStream(request.id) != nil,
            let record = try journal.record(for: request.id), record.isUnfinished
        {
            // The same stream asked for again while its download runs: that one goes on (the
            // descriptor opened for this request is closed with it).
            return .waiting(record)
        }
        catalog.remember(
            request.url,
            headers: request.headers,
            urls: request.allURLs,
            logger: request.logger,
            context: ServiceContext.current,
            stream: request.stream,
            for: request.id
        )
        if request.stream != nil {
            // A stream starts from its first byte in each process: bytes written to it by another
            // cannot be continued.
            unlink(journal.partialPath(for: request.id))
            return .queued(try saveFresh(request, in: journal))
        }
        // Rows hold URLs without their user name and password (they never reach the disk).
        let urlText = request.url.redactedString
        var existing = rowsExist ? try journal.record(for: request.id) : nil
        if existing == nil {
            // A download never seen: one insertion, no lookup.
            var record = fresh(request)
            if let length = journal.adoptOrphanPartial(for: request.id) { record.bytesCommitted = length }
            if try journal.insertIfAbsent(record, for: request.id) {
                rowsExist = false
                return .queued(record)
            }
            existing = try journal.record(for: request.id)
        }
        rowsExist = true
        if let record = existing,
            record.folder != request.folder
                || (record.folder == nil
                    && (record.destination != request.destination
                        || (record.url != urlText && record.state == .completed)))
        {
            // Another destination under the same id (a 128-bit collision), or a finished file that
            // another URL is to replace: a new download, whose partial file is not that one's. (A
            // download into a folder is its URL or its caller's key: a finished one asked for under
            // the same key from another URL, a signed link refreshed, is the same file.)
            unlink(journal.partialPath(for: request.id))
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
            catalog.remember(newURL: request.url, for: request.id)
            catalog.existingHandle(request.id)?.update(url: request.url)
        }
        request.setRequested(in: &record)
        if record.state != .completed {
            record.expectedChecksum = request.checksum?.description
            record.expectedSize = request.expectedSize
        }
        switch record.apply(.requested(sequence: catalog.nextQueueSequence())) {
        case .moves:
            try journal.save(record, for: request.id)
            return .queued(record)
        case .unchanged, .removed:  // already queued, waiting or running (a request removes nothing)
            try journal.save(record, for: request.id)
            return .waiting(record)
        case .refused:
            // Completed: the file stays unless it is gone or changed, or is to be revalidated.
            // The file the request found at its destination, when it is the one the row describes;
            // else looked at now: the download may have placed it since (a row into a folder names
            // its own file).
            let intact = { (file: PlacedFile?) in
                PlacedFile.isIntact(file, length: record.totalBytes, modificationTime: record.placedModificationTime)
            }
            guard
                (record.destination == request.destination && intact(request.found))
                    || intact(PlacedFile.at(record.destination)),
                request.checksum == nil || hasChecksum(record.destination, request)
            else {
                // The file recorded as complete is gone or changed at its destination, or does not
                // have the checksum asked for (the record was stale): fetch it anew; the final check
                // decides.
                unlink(journal.partialPath(for: request.id))
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
    }

    /// Whether the file at `path` has the request's checksum: hashed when the request was checked
    /// if it was found there then, else now (a download into a folder names its own file).
    private func hasChecksum(_ path: String, _ request: PreparedRequest) -> Bool {
        guard let checksum = request.checksum else { return true }
        if path == request.destination, let found = request.foundHasChecksum { return found }
        return (try? Checksum.digest(ofFileAt: path, algorithm: checksum.algorithm)) == checksum.hex
    }

    /// A new row for the request, queued at the end of its priority.
    func fresh(_ request: PreparedRequest) -> DownloadRecord {
        var record = DownloadRecord(url: request.url.redactedString, destination: request.destination)
        record.queueSequence = catalog.nextQueueSequence()
        record.host = request.url.hostKey
        record.expectedChecksum = request.checksum?.description
        record.expectedSize = request.expectedSize
        record.folder = request.folder
        request.setRequested(in: &record)
        return record
    }

    /// Replaces the request's row with a new one.
    func saveFresh(_ request: PreparedRequest, in journal: Journal) throws(DownloadError) -> DownloadRecord {
        let record = fresh(request)
        try journal.save(record, for: request.id)
        return record
    }

    /// Shows an outcome on the download's handle: the live one, or (when `creatingHandle`) a new
    /// one. Call with the journal locked, so the loop's next event for it comes after.
    func publish(
        _ outcome: QueueOutcome,
        for request: PreparedRequest,
        in journal: Journal,
        creatingHandle: Bool
    ) -> Download? {
        let record: DownloadRecord
        switch outcome {
        case .queued(let r), .waiting(let r), .complete(let r): record = r
        }
        let progress = record.progress
        let download: Download
        let isNew: Bool
        let foundComplete = if case .complete = outcome { true } else { false }
        if creatingHandle {
            (download, isNew) = catalog.handle(request.id) {
                // A download into a folder shows the file it chose, once it chose one.
                makeHandle(for: request, destinationPath: record.destination, progress: progress)
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
            // No handle shows it: the manager's feed hears of a queued row from here.
            if case .queued = outcome, catalog.feed.hasSubscribers {
                catalog.feed.publish(
                    DownloadManagerEvent(
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
        case .waiting(let record):
            guard isNew else { break }
            switch record.state {
            case .paused, .interrupted: download.hub.publish(.paused(progress))
            default: download.hub.publish(.queued)
            }
        case .complete(let record):
            download.foundComplete.store(true, ordering: .relaxed)
            let total = record.totalBytes ?? 0
            download.hub.publish(
                .progress(DownloadProgress(bytesReceived: total, totalBytes: total, estimatedTimeRemaining: .zero))
            )
            download.hub.publish(.completed(URL(fileURLWithPath: record.destination, isDirectory: false)))
        }
        return download
    }

    func makeHandle(
        for request: PreparedRequest,
        destinationPath: String? = nil,
        progress: DownloadProgress
    ) -> Download {
        catalog.makeHandle(
            request.id,
            url: request.url,
            destinationPath: destinationPath ?? request.destination,
            stateDirectoryPath: request.stateDirectory,
            progress: progress,
            controller: inbox
        )
    }

    /// Checks that a URL is one Haul can download.
    static func validate(_ url: URL) throws(DownloadError) -> URL {
        guard let scheme = url.scheme?.lowercased() else {
            throw DownloadError(code: .invalidURL, url: url.redactedString, detail: "it has no scheme such as https://")
        }
        guard scheme == "http" || scheme == "https" else {
            throw DownloadError(code: .unsupportedScheme, url: url.redactedString, detail: "the scheme '\(scheme)'")
        }
        guard let host = url.host, !host.isEmpty else {
            throw DownloadError(code: .invalidURL, url: url.redactedString, detail: "it has no host")
        }
        return url
    }
}
