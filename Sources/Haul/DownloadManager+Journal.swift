import FoundationEssentials

extension DownloadManager {
    /// The downloads recorded in `stateDirectory`'s journal, oldest first.
    ///
    /// While a manager runs on the state directory (in this process or another), the journal is read
    /// as it stands: queued and running rows are live.
    ///
    /// - Throws: ``DownloadError`` with code `.journal` when there is no usable journal there.
    public static func journalEntries(stateDirectory: URL) throws -> [JournalEntry] {
        let path = stateDirectory.appendingPathComponent(Journal.fileName).path
        guard FileManager.default.fileExists(atPath: path) else {
            throw DownloadError(code: .journal, url: nil, path: path, detail: "there is no journal there yet")
        }
        return try Journal.entries(directory: stateDirectory.path)
    }

    /// What a journal of this manager (open, or closed when nothing in it was unfinished) records
    /// for `id`, whatever its state (a completed or failed download included); `nil` when none
    /// records it. One lookup by id: to ask about a few
    /// downloads of a large journal without reading all of it, as ``journalEntries(stateDirectory:)``
    /// does (and cannot while a manager uses the journal).
    public func journalEntry(id: DownloadID) -> JournalEntry? {
        for journal in catalog.openJournals {
            if let record = try? journal.record(for: id) { return JournalEntry(id: id, record: record) }
        }
        // Journals beside destination folders are closed once nothing in them is unfinished.
        for directory in catalog.closedDirectories {
            if let entry = Journal.readOnlyEntry(directory: directory, id: id) { return entry }
        }
        return nil
    }
}
