import FoundationEssentials
import Haul

/// A row of the fleet's queue as any process reads it.
public struct FleetEntry: Sendable, Hashable {
    /// The download's id.
    public let id: DownloadID
    /// Where it comes from.
    public let url: URL
    /// The file to write (a relative row's under this process's output folder).
    public let destination: URL
    /// The destination as the row holds it: absolute, or relative to each worker's output folder.
    public let path: String
    /// `host:port`.
    public let host: String
    /// Higher runs first.
    public let priority: Int
    /// Where it stands.
    public let state: FleetState
    /// The worker holding it while it runs.
    public let owner: String?
    /// How many times it was claimed (the version of its latest lease).
    public let leaseVersion: Int64
    /// How many claims it took.
    public let attempts: Int
    /// The file's length once completed.
    public let bytes: Int64?
    /// Why it failed.
    public let lastError: String?
    /// The worker that recorded its outcome.
    public let finishedBy: String?
    /// The class of its failure, when the worker that recorded it knew it (``DownloadError/category``).
    public let errorCategory: DownloadError.Category?

    init?(row: [String?], outputFolder: URL) {
        guard row.count >= 12, let head = FleetSchema.RowHead(row, outputFolder: outputFolder),
            let state = row[5].flatMap(FleetState.init(rawValue:)), let version = row[7].flatMap({ Int64($0) }),
            let attempts = row[8].flatMap({ Int($0) })
        else { return nil }
        (id, url, destination, host, priority) = (head.id, head.url, head.destination, head.host, head.priority)
        path = head.path
        self.state = state
        owner = row[6]
        leaseVersion = version
        self.attempts = attempts
        bytes = row[9].flatMap { Int64($0) }
        lastError = row[10]
        finishedBy = row[11]
        errorCategory = row.count > 12 ? row[12].flatMap(DownloadError.Category.init(name:)) : nil
    }
}
