import FoundationEssentials
import Glibc
import HaulIO
import HaulScheduler
import HaulValues

/// Taking over the partial files of a manager that is gone (a worker of a fleet that died, its
/// state directory on storage the others share).
extension DownloadQueue {
    /// The lock file adopters take (blocking) before the journal's own lock (not blocking): two
    /// adopters wait for each other, a few milliseconds, while a manager that still runs on the
    /// directory refuses them at once.
    static let takeOverLockName = "takeover.lock"

    /// See ``DownloadManager/takeOver(_:from:)``.
    func takeOver(_ requests: [DownloadRequest], from directory: URL) throws(HaulValues.DownloadError) -> [HaulValues
        .DownloadID:
        Int64]
    {
        let source = FilePath.standardized(directory)
        // Nothing to take where no manager ever wrote a journal (and no folder is created there).
        guard access("\(source)/\(Journal.fileName)", F_OK) == 0 else { return [:] }
        var prepared: [PreparedRequest] = []
        for request in requests {
            let request = try prepare(request)
            if request.stateDirectory != source { prepared.append(request) }
        }
        guard !prepared.isEmpty else { return [:] }
        return try Self.whileTakingOver(source) {
            () throws(HaulValues.DownloadError) -> [HaulValues.DownloadID: Int64] in
            try takeOver(prepared, fromLocked: source)
        }
    }

    /// Runs `body` holding `directory`'s take-over lock, which every taker, giver and sweeper of
    /// its rows takes (blocking) before the journal's own lock (not blocking).
    static func whileTakingOver<T>(
        _ directory: String,
        _ body: () throws(HaulValues.DownloadError) -> T
    ) throws(HaulValues.DownloadError) -> T {
        let lockPath = "\(directory)/\(takeOverLockName)"
        let lock = try PrivateFile.open(lockPath, O_RDWR | O_CREAT)
        guard lock >= 0 else {
            throw HaulValues.DownloadError(
                code: .fileSystem,
                url: nil,
                errno: errno,
                path: lockPath,
                detail: "could not open the lock for taking over a state directory"
            )
        }
        defer { Glibc.close(lock) }
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else {
                throw HaulValues.DownloadError(
                    code: .fileSystem,
                    url: nil,
                    errno: errno,
                    path: lockPath,
                    detail: "flock failed"
                )
            }
        }
        defer { flock(lock, LOCK_UN) }
        return try body()
    }

    private func takeOver(
        _ prepared: [PreparedRequest],
        fromLocked source: String
    ) throws(HaulValues.DownloadError) -> [HaulValues.DownloadID: Int64] {
        // Opened exclusively: `.journalLocked` while its manager lives. Opening it marks what ran there as
        // interrupted and, when it was last written in another boot (another machine's, on shared
        // storage), cuts each partial file back to the bytes that were synced: only those are sure
        // to have reached the storage.
        let other = try Journal(directory: source, exclusive: true)
        defer { other.close() }
        var taken: [HaulValues.DownloadID: Int64] = [:]
        var found: [String: [(PreparedRequest, JournalRow)]] = [:]
        for request in prepared {
            guard let record = try other.record(for: request.id), Self.isTakenOver(record, for: request, from: other)
            else { continue }
            found[request.stateDirectory, default: []].append((request, record))
        }
        // Into each of this manager's journals, by the loop: one transaction each. The other journal
        // lets its rows go only once that transaction committed, so a commit that fails (a full
        // disk) leaves them there.
        for (directory, rows) in found {
            let moved = try onLoop(directory) { [self] writing, reply throws(HaulValues.DownloadError) in
                var moved: [HaulValues.DownloadID: Int64] = [:]
                for (request, record) in rows {
                    guard let bytes = try move(request.id, record: record, from: other, into: writing.journal)
                    else { continue }
                    moved[request.id] = bytes
                }
                reply.set(moved)
            }
            for id in moved.keys { other.remove(id) }
            taken.merge(moved) { first, _ in first }
        }
        return taken
    }

    /// Whether `other`'s `record` is what `request` takes over: its file, placed whole and unchanged
    /// since, or unfinished with bytes in its partial file.
    private static func isTakenOver(_ record: JournalRow, for request: PreparedRequest, from other: Journal) -> Bool {
        guard record.destination == request.destination || record.folder == request.folder && request.folder != nil
        else { return false }
        if record.state == .completed {
            // Placed whole by the gone manager, which died before telling anyone: this row says
            // so here, while the file is still the one it placed (asking for it transfers nothing).
            return PlacedFile.isIntact(
                record.destination,
                length: record.totalBytes,
                modificationTime: record.placedModificationTime
            )
        }
        return record.isUnfinished && record.mayHaveStarted
            && other.partialPath(for: request.id).flatMap(FilePath.fileLength) != nil
    }

    /// Moves one download's partial file (none for a completed one) and row from `other` into
    /// `journal` (on the loop, in its transaction), unless
    /// `journal`'s own row for it is queued or running, or holds as many bytes: the bytes now in
    /// `journal`'s partial file, or `nil` when nothing moved (a partial file on another file system
    /// is not copied: the download starts over).
    func move(
        _ id: HaulValues.DownloadID,
        record: JournalRow,
        from other: Journal,
        into journal: Journal
    ) throws(HaulValues.DownloadError) -> Int64? {
        if let own = try journal.record(for: id) {
            guard [.paused, .interrupted, .failed].contains(own.state), own.bytesCommitted < record.bytesCommitted
            else { return nil }
        }
        if record.state == .completed {
            try journal.save(record, for: id)
            return record.totalBytes ?? 0
        }
        // Journals of state directories, both: a journal in memory is nobody's to take over.
        guard let target = journal.partialPath(for: id), let source = other.partialPath(for: id) else { return nil }
        // Only a partial file the gone manager wrote moves: a link or a FIFO there stays.
        let partial = try PrivateFile.open(source, O_RDONLY)
        guard partial >= 0 else { return nil }
        Glibc.close(partial)
        guard rename(source, target) == 0 else { return nil }
        // Interrupted (opening `other` marked it so, had it run) or paused: asking for it continues it.
        try journal.save(record, for: id)
        // Over several connections, the map says which bytes are there; else the file's length.
        return record.segments != nil ? record.bytesCommitted : FilePath.fileLength(target) ?? 0
    }
}
