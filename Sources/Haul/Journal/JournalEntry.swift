import FoundationEssentials

/// One download as a state directory's journal records it (for listings such as `haul --list`).
public struct JournalEntry: Sendable, Hashable {
    /// The download's id.
    public var id: DownloadID
    /// Its URL, credentials removed.
    public var url: String
    /// Where the finished file goes.
    public var destination: String
    /// `queued`, `running`, `interrupted` (queued or running when its process stopped: it continues
    /// when asked for again, or under a manager that resumes unfinished downloads), `paused`,
    /// `completed` or `failed`.
    public var state: String
    /// Bytes on disk at the last checkpoint.
    public var bytesReceived: Int64
    /// The file's length, when known.
    public var totalBytes: Int64?
    /// The last failure, as a sentence.
    public var lastError: String?
}

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

extension JournalEntry {
    init(id: DownloadID, record: DownloadRecord) {
        self.init(
            id: id,
            url: URL(string: record.url)?.redactedString ?? record.url,
            destination: record.destination,
            state: record.state.rawValue,
            bytesReceived: record.bytesCommitted,
            totalBytes: record.totalBytes,
            lastError: record.lastError
        )
    }
}
