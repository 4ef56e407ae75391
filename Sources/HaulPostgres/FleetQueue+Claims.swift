import Dispatch
import FoundationEssentials
import Glibc
import Haul

/// A worker's claims, renewals and outcomes: the leases of the fleet's queue.
extension FleetQueue {
    // MARK: claiming

    /// Claims up to `limit` queued downloads for this worker, highest priority first, then first in,
    /// within the fleet-wide per-host limit. Rows whose lease expired are queued again first.
    public func claim(upTo limit: Int) async throws(FleetError) -> [FleetLease] {
        guard limit > 0 else { return [] }
        let worker = configuration.worker
        let lease = FleetSchema.interval(configuration.leaseDuration)
        let perHost = configuration.maxConcurrentDownloadsPerHost
        let outputFolder = configuration.outputFolder
        let requeue = requeue
        return try await run { connection throws(FleetError) -> [FleetLease] in
            // Expired leases are looked for at most once a second by each process (every worker
            // does it, and a lease is seconds long): one statement fewer per claim.
            let now = ContinuousClock.now
            if requeue.lastDone.map({ now - $0 >= .seconds(1) }) ?? true {
                try connection.query(FleetSchema.requeueExpired, [lease])
                requeue.lastDone = now
            }
            let rows: [[String?]]
            if let perHost {
                rows = try connection.transaction { () throws(FleetError) -> [[String?]] in
                    // Counting running rows per host is exact only if no other claim runs meanwhile.
                    try connection.query("SELECT pg_advisory_xact_lock($1)", [String(FleetSchema.claimLock)])
                    return try connection.query(
                        FleetSchema.claimWithinHostLimit,
                        [worker, lease, String(limit), String(max(1, perHost)), String(limit * 8 + 256)]
                    )
                }
            } else {
                rows = try connection.query(FleetSchema.claim, [worker, lease, String(limit)])  // one statement
            }
            return rows.compactMap { FleetLease(row: $0, outputFolder: outputFolder) }.sorted {
                $0.priority != $1.priority ? $0.priority > $1.priority : $0.sequence < $1.sequence
            }
        }
    }

    /// What a renewal found.
    public struct Renewal: Sendable, Hashable {
        /// Still this worker's, for another lease's length.
        public var renewed: [FleetLease] = []
        /// Taken over: their transfers must stop and report nothing.
        public var lost: [FleetLease] = []
        /// Renewed, and another process asked for them to pause (``FleetQueue/pause(_:)``) or be
        /// cancelled: stop them and ``settle(_:as:)`` them so.
        public var requested: [FleetLease: FleetState] = [:]
    }

    /// Extends the leases still this worker's; the others were taken over (their transfers must stop
    /// and report nothing).
    public func renew(_ leases: [FleetLease]) async throws(FleetError) -> Renewal {
        guard !leases.isEmpty else { return Renewal() }
        let worker = configuration.worker
        let lease = FleetSchema.interval(configuration.leaseDuration)
        let held = try await run { connection throws(FleetError) -> [String: String?] in
            let rows = try connection.query(
                """
                UPDATE haul_downloads SET lease_expires = now() + $2::interval
                FROM unnest($3::text[], $4::bigint[]) AS mine(id, version)
                WHERE haul_downloads.id = mine.id AND lease_version = mine.version AND owner = $1
                    AND state = '\(FleetState.running.rawValue)'
                RETURNING haul_downloads.id, haul_downloads.requested
                """,
                [worker, lease] + FleetSchema.leaseArrays(leases)
            )
            var held: [String: String?] = [:]
            for row in rows { if let id = row[0] { held[id] = row[1] } }
            return held
        }
        var renewal = Renewal()
        for lease in leases {
            guard let request = held[lease.id.rawValue] else {
                renewal.lost.append(lease)
                continue
            }
            renewal.renewed.append(lease)
            if let state = request.flatMap(FleetState.init(rawValue:)) { renewal.requested[lease] = state }
        }
        return renewal
    }

    /// Ends leased rows as `state` (``FleetState/paused`` or ``FleetState/cancelled``, as asked), each
    /// only while its lease is the caller's, and announces each: the ids settled.
    @discardableResult
    public func settle(_ leases: [FleetLease], as state: FleetState) async throws(FleetError) -> Set<DownloadID> {
        guard state == .paused || state == .cancelled else { return [] }
        return try await end(
            leases,
            states: leases.map { _ in state },
            bytes: leases.map { _ in nil },
            errors: leases.map { _ in nil }
        )
    }
}
