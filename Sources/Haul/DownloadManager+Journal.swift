import FoundationEssentials

extension DownloadManager {
    /// The downloads recorded in `stateDirectory`'s journal, oldest first.
    ///
    /// - Throws: ``DownloadError`` with code `.journal` when there is no usable journal there, or
    ///   `.journalLocked` while a manager is using it.
    public static func journalEntries(stateDirectory: URL) throws -> [JournalEntry] {
        let path = stateDirectory.appendingPathComponent(Journal.fileName).path
        guard FileManager.default.fileExists(atPath: path) else {
            throw DownloadError(code: .journal, url: nil, path: path, detail: "there is no journal there yet")
        }
        let journal = try Journal(directory: stateDirectory.path)
        defer { journal.close() }
        return try journal.allRecords().map { JournalEntry(id: $0, record: $1) }
    }

    /// What a journal this manager has open records for `id`, whatever its state (a completed or
    /// failed download included); `nil` when none records it. One lookup by id: to ask about a few
    /// downloads of a large journal without reading all of it, as ``journalEntries(stateDirectory:)``
    /// does (and cannot while a manager uses the journal).
    public func journalEntry(id: DownloadID) -> JournalEntry? {
        for journal in catalog.openJournals {
            if let record = try? journal.record(for: id) { return JournalEntry(id: id, record: record) }
        }
        return nil
    }
}
