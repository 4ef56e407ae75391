import FoundationEssentials
import HaulIO
import HaulValues

/// One download as a state directory's journal records it (for listings such as `haul --list`).
public struct JournalEntry: Sendable, Hashable {
    /// The download's id.
    public var id: DownloadID
    /// Its URL, credentials removed.
    public var url: String
    /// Where the finished file goes.
    public var destination: String
    /// Where it stands in its queue.
    public var state: QueueState
    /// Bytes on disk: at the last checkpoint, or, for a download that another process runs over one
    /// connection, as many as its partial file holds now (a listing of a journal in use).
    public var bytesReceived: Int64
    /// The file's length, when known.
    public var totalBytes: Int64?
    /// The last failure, as a sentence.
    public var lastError: String?
    /// The destination's modification time when Haul placed the complete file there.
    public var placedModificationTime: Date?
    /// The checksum the download was asked for (and its file was checked against before it was
    /// placed), if any: what ``DownloadManager/verify(stateDirectory:)`` hashes the file against.
    public var checksum: Checksum? = nil
    /// The file a process was placing when it stopped before its row said so (``JournalRow/placing``).
    var placing: String? = nil

    /// Whether the destination holds the file Haul placed there: same length and modification time
    /// (or, placed by a process killed before its row said so, the very file it placed). `false`
    /// when it was never placed, or was deleted, replaced or edited since (then it is not Haul's
    /// file: `haul` gives the download another name rather than overwrite it).
    public var destinationHoldsPlacedFile: Bool {
        if let placing, state != .completed { return PlacedFile.find(placing, at: destination, numbered: false) != nil }
        guard placedModificationTime != nil || state == .completed else { return false }
        return PlacedFile.isIntact(
            destination,
            length: totalBytes,
            modificationTime: placedModificationTime?.timeIntervalSince1970
        )
    }
}

extension JournalEntry {
    init(_ row: ListedRow) {
        self.init(id: row.id, record: row.record)
        if let bytes = row.bytesOnDisk { bytesReceived = bytes }
    }

    package init(id: HaulValues.DownloadID, record: JournalRow) {
        self.init(
            id: DownloadID(id),
            url: URL(string: record.url)?.redactedString ?? record.url,
            destination: record.destination,
            state: QueueState(record.state),
            bytesReceived: record.bytesCommitted,
            totalBytes: record.totalBytes,
            lastError: record.lastError,
            placedModificationTime: record.placedModificationTime.map(Date.init(timeIntervalSince1970:)),
            checksum: record.expectedChecksum.flatMap(Checksum.init),
            placing: record.placing
        )
    }
}
