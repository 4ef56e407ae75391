import FoundationEssentials
import Haul

/// A download this worker claimed: its row's id and what it needs to fetch it, with the lease's
/// version, which every later change of the row must show (fencing).
public struct FleetLease: Sendable, Hashable {
    /// The row's id in the queue (``DownloadRequest/id`` of the request queued; for one queued by a
    /// relative name, that name's id taken from `/`, whoever queued it).
    public let id: DownloadID
    /// Where it comes from (never with credentials: the queue holds none).
    public let url: URL
    /// The file to write.
    public let destination: URL
    /// Why this worker must not write ``destination``, or `nil`: the row's path is absolute, climbs
    /// out of the output folder (`..`), is in a state folder, or leads out through a symbolic link.
    /// ``FleetWorker`` fails such a lease with this reason instead of running it; a caller that
    /// claims rows itself should do the same.
    public let refusal: String?
    /// `host:port`, what the fleet-wide per-host limit counts.
    public let host: String
    /// Higher runs first.
    public let priority: Int
    /// The row's place in the fleet's order (first in, first out within a priority).
    public let sequence: Int64
    /// Grows with each claim of the row: a lease of an older version is another worker's past.
    public let version: Int64
    /// How many times the row was claimed, this claim included (more than one: taken over or retried).
    public let attempts: Int
    /// The worker that claimed the row before this claim (`nil` for a first claim): one that stopped,
    /// or died and lost it. Its state directory may hold the row's bytes
    /// (``FleetWorker/init(queue:manager:concurrency:sharedStateDirectory:pollInterval:logger:)``).
    public let previousWorker: String?
    /// Whether the previous claim ended by its lease running out (the worker died, hung or lost the
    /// database), rather than by that worker giving the row back: a worker still running then hands
    /// its bytes over once it learns (``DownloadManager/handOver(_:to:)``), and a taker waits for them.
    public let previousLeaseExpired: Bool
    /// ``request``'s id in the worker's manager (its destination's, under the worker's output
    /// folder: for a row queued by a relative name, not ``id``), hashed once here rather than at
    /// each lookup of a held download.
    let requestID: DownloadID
    /// The worker's output folder, which the row's name must stay inside when the file is placed
    /// (anyone who can write the table can write a name).
    private let outputFolder: String

    init?(row: [String?], outputFolder: URL) {
        guard row.count >= 8, let head = FleetSchema.RowHead(row, outputFolder: outputFolder),
            let sequence = row[5].flatMap({ Int64($0) }), let version = row[6].flatMap({ Int64($0) }),
            let attempts = row[7].flatMap({ Int($0) })
        else { return nil }
        (id, url, destination, host, priority) = (head.id, head.url, head.destination, head.host, head.priority)
        refusal = FleetSchema.refusal(head.path, in: outputFolder)
        self.sequence = sequence
        self.version = version
        self.attempts = attempts
        previousWorker = row.count > 8 ? row[8] : nil
        previousLeaseExpired = row.count > 9 && row[9] == "t"
        requestID = DownloadRequest(url: head.url, destination: head.destination, priority: head.priority).id
        self.outputFolder = outputFolder.standardizedFileURL.path
    }

    /// The request a worker's ``DownloadManager`` runs for this lease.
    public var request: DownloadRequest {
        var request = DownloadRequest(url: url, destination: destination, priority: priority)
        request.confinedTo = outputFolder
        return request
    }
}
