import FoundationEssentials
import Haul

/// Where a download of the fleet's queue stands.
public enum FleetState: String, Sendable, Hashable, CaseIterable {
    /// Waiting for a worker.
    case queued
    /// Claimed by a worker, under its lease.
    case running
    /// Held back until resumed.
    case paused
    /// Downloaded whole by a worker.
    case completed
    /// Given up on, with the reason.
    case failed
    /// Cancelled; never taken again.
    case cancelled
}

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
    /// ``request``'s id in the worker's manager (its destination's, under the worker's output
    /// folder: for a row queued by a relative name, not ``id``), hashed once here rather than at
    /// each lookup of a held download.
    let requestID: DownloadID

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
        requestID = DownloadRequest(url: head.url, destination: head.destination, priority: head.priority).id
    }

    /// The request a worker's ``DownloadManager`` runs for this lease.
    public var request: DownloadRequest {
        DownloadRequest(url: url, destination: destination, priority: priority)
    }
}

/// What became of a leased download, for ``FleetQueue/record(_:)``.
public struct FleetOutcome: Sendable, Hashable {
    /// How it ended.
    public enum Result: Sendable, Hashable {
        /// Whole at its destination, `bytes` long.
        case completed(bytes: Int64)
        /// Given up on for good.
        case failed(reason: String)
    }

    /// The lease it ran under.
    public let lease: FleetLease
    /// How it ended.
    public let result: Result

    /// `lease`'s download ended with `result`.
    public init(_ lease: FleetLease, _ result: Result) {
        self.lease = lease
        self.result = result
    }

    var state: FleetState {
        if case .completed = result { .completed } else { .failed }
    }
}

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
    }
}
