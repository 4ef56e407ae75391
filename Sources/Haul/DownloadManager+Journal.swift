import FoundationEssentials
import HaulIO
import HaulValues

extension DownloadManager {
    /// The downloads recorded in `stateDirectory`'s journal, oldest first.
    ///
    /// While a manager runs on the state directory (in this process or another), the journal is read
    /// as it stands: queued and running rows are live.
    ///
    /// - Throws: ``DownloadError`` with code `.journal` when there is no usable journal there.
    public static func journalEntries(stateDirectory: URL) throws -> [JournalEntry] {
        // A link named here is the caller's choice, as for ``Configuration/stateDirectory``.
        let directory = stateDirectoryPath(stateDirectory)
        let path = "\(directory)/\(Journal.fileName)"
        guard FileManager.default.fileExists(atPath: path) else {
            throw DownloadError(code: .journal, url: nil, path: path, detail: "there is no journal there yet")
        }
        return try withPublicErrors { try Journal.entries(directory: directory).map(JournalEntry.init) }
    }

    /// What a journal of this manager (open, or closed when nothing in it was unfinished) records
    /// for `id`, whatever its state (a completed or failed download included); `nil` when none
    /// records it. One lookup by id: to ask about a few
    /// downloads of a large journal without reading all of it, as ``journalEntries(stateDirectory:)``
    /// does (and cannot while a manager uses the journal).
    public func journalEntry(id: DownloadID) -> JournalEntry? {
        let id = id.engine
        // Read on the loop, which writes the open journals' rows.
        let open = queue.lookOnLoop { [catalog] in
            catalog.openJournals.lazy.compactMap { try? $0.record(for: id) }.first
        }
        if let record = open ?? nil { return JournalEntry(id: id, record: record) }
        // Journals beside destination folders are closed once nothing in them is unfinished.
        for directory in catalog.closedDirectories {
            if let row = Journal.readOnlyEntry(directory: directory, id: id) { return JournalEntry(row) }
        }
        return nil
    }
}

extension DownloadManager {
    /// Takes over what another manager's state directory holds of `requests`: for each download that
    /// is unfinished there with bytes in its partial file, the partial file moves into this manager's
    /// state directory and its row (validators, bytes synced, the segments of a download over several
    /// connections) into this manager's journal, and leaves the other journal. Asking for the
    /// download then continues from those bytes under the usual rules: a `Range` from where they end,
    /// `If-Range` with the validator on record, the answer's start checked.
    ///
    /// A download the other manager completed (its file placed, unchanged since) moves too: asking
    /// for it here transfers nothing.
    ///
    /// For a fleet of processes whose state directories are on storage they all share: the work of one
    /// that died is taken over by another without fetching again what it had written. The other
    /// directory's manager must be gone: its journal's lock is taken for the move (adopters wait for
    /// each other; a manager still running refuses them).
    ///
    /// - A download this manager has queued or running, or holding at least as many bytes, is left
    ///   alone; so is one whose partial file is on another file system (it starts over).
    /// - When the other journal was last written in another boot (another machine's, a crash), its
    ///   partial files are first cut back to the bytes that were synced, as after a reboot.
    ///
    /// - Returns: the downloads taken over, and how many bytes each brings.
    /// - Throws: ``DownloadError`` with code `.journalLocked` while any manager has
    ///   `stateDirectory`'s journal open (it is opened exclusively), or the journal's and file system's errors; a request's own errors
    ///   (`.invalidURL`…) as ``download(_:)`` throws them.
    @discardableResult
    public func takeOver(_ requests: [DownloadRequest], from stateDirectory: URL) throws -> [DownloadID: Int64] {
        let taken = try withPublicErrors { try queue.takeOver(requests, from: stateDirectory) }
        return Dictionary(uniqueKeysWithValues: taken.map { (DownloadID($0), $1) })
    }
}

extension DownloadManager {
    /// Gives paused downloads of this manager to another one while this one runs on: for each
    /// download in `ids` that is paused here, its partial file and row (validators, bytes synced,
    /// segments) move into the journal of `stateDirectory`, a folder no manager runs on (made when
    /// missing), where the other manager's ``takeOver(_:from:)`` finds them and continues from those
    /// bytes. The download leaves this manager: its handle ends as cancelled (``DownloadEvent/cancelled``)
    /// and asking for it here starts it again.
    ///
    /// For a fleet worker whose lease was taken while it still ran (it missed its renewals): the
    /// taker cannot open this manager's journal, so the bytes go where it can. A download that is not
    /// paused here (running, finished, unknown) is left alone; pause it and wait for its
    /// ``DownloadEvent/paused(_:)`` first.
    ///
    /// - Returns: the downloads handed over, and how many bytes each brings (0: a paused download
    ///   with nothing on disk, whose row went all the same).
    /// - Throws: ``DownloadError`` with code `.journalLocked` while a manager runs on `stateDirectory`,
    ///   or the journal's and file system's errors.
    @discardableResult
    public func handOver(_ ids: [DownloadID], to stateDirectory: URL) throws -> [DownloadID: Int64] {
        let handed = try withPublicErrors { try queue.handOver(ids.map(\.engine), to: stateDirectory) }
        return Dictionary(uniqueKeysWithValues: handed.map { (DownloadID($0), $1) })
    }

    /// Removes downloads from the journal of `stateDirectory`, which no manager may run on: their
    /// rows and partial files. For what nobody took of a folder downloads were handed over in
    /// (``handOver(_:to:)``).
    ///
    /// - Returns: how many rows were removed.
    /// - Throws: ``DownloadError`` with code `.journalLocked` while a manager runs there, or the
    ///   journal's errors.
    @discardableResult
    public static func removeDownloads(_ ids: [DownloadID], stateDirectory: URL) throws -> Int {
        try withPublicErrors { try DownloadQueue.removeDownloads(ids.map(\.engine), in: stateDirectory) }
    }

    /// What the journal of `stateDirectory` records of `id`, read as it stands (a manager may be
    /// running on it, in this process or another); `nil` when it records nothing of `id` or cannot
    /// be read. One lookup, for a large journal (``journalEntries(stateDirectory:)`` reads all).
    public static func journalEntry(id: DownloadID, stateDirectory: URL) -> JournalEntry? {
        Journal.readOnlyEntry(directory: stateDirectoryPath(stateDirectory), id: id.engine).map(JournalEntry.init)
    }
}
