import Dispatch
import FoundationEssentials
import Glibc
import Haul

/// A download queue in PostgreSQL that any number of processes share: each row is claimed by one
/// worker at a time under a lease, and a worker that stops renewing its leases loses its rows to
/// the others.
///
/// The queue holds what a worker needs to start a download (its URL without credentials, its
/// destination, priority, the fleet's order), who holds it (`owner`, `lease_version`,
/// `lease_expires`) and its outcome. Bytes, partial files and validators stay in each worker's own
/// ``DownloadManager`` journal: this is the fleet's queue, not its disk.
///
/// - Claims take rows with `SELECT … FOR UPDATE SKIP LOCKED` in batches, highest priority first,
///   then first in; rows whose lease expired are queued again (in their old place) before each claim.
/// - With ``Configuration/maxConcurrentDownloadsPerHost``, claims are serialised by a transaction
///   advisory lock and count the running rows per host, so the limit holds across the fleet.
/// - Fencing: ``complete(_:bytes:)``, ``fail(_:reason:)``, ``renew(_:)`` and ``release(_:)`` change
///   a row only while the caller's lease (owner and version) is the row's: a worker whose lease was
///   taken over changes nothing.
///
/// Every statement is parameterised. The connection string's password never appears in an error.
public final class FleetQueue: @unchecked Sendable {
    // @unchecked Sendable: `connection` is touched only on `queue`, a serial queue.

    /// Where the queue is and how this worker takes part.
    public struct Configuration: Sendable {
        /// A libpq connection string: `postgres://user:password@host:port/database` or `key=value` pairs.
        public var connectionString: String
        /// This process's name in the leases it takes: unique in the fleet (by default host name,
        /// process id and a random suffix).
        public var worker: String
        /// Where this process puts the files of rows queued with relative names (see
        /// ``FleetQueue/enqueue(_:relativeTo:)``): by default the current directory.
        public var outputFolder: URL = URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        /// How long a claimed row stays this worker's without a renewal. A worker renews well within it
        /// (a third); a worker that stops (killed, hung, cut off) loses its rows this long after its
        /// last renewal.
        public var leaseDuration: Duration = .seconds(30)
        /// At most this many rows of one host (`host:port`) running at once across every worker of
        /// the fleet; `nil` for no limit.
        public var maxConcurrentDownloadsPerHost: Int?

        /// The queue at `connectionString`, for `worker` (a name made unique when `nil`).
        public init(connectionString: String, worker: String? = nil) {
            self.connectionString = connectionString
            self.worker =
                worker
                ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        }
    }

    /// What the queue was made with.
    public let configuration: Configuration
    /// The database, without its password.
    public let target: String
    private let connection: PostgresConnection
    private let queue = DispatchQueue(label: "haul.fleet-queue")
    /// When this process last queued expired leases again (touched on `queue` only).
    private let requeue = RequeueClock()

    private final class RequeueClock: @unchecked Sendable {
        // @unchecked Sendable: used on the queue's serial queue only.
        var lastDone: ContinuousClock.Instant?
    }

    /// Connects and creates the queue's table and indexes when they are missing.
    public init(configuration: Configuration) async throws(FleetError) {
        let target = PostgresConnection.redacted(configuration.connectionString)
        guard !configuration.worker.isEmpty, configuration.leaseDuration > .zero else {
            throw FleetError(
                .invalidArgument,
                target: target,
                detail: "a worker needs a name and a lease longer than zero"
            )
        }
        // Every stored property but the connection is set before the wait for it: a `let` assigned
        // after the `await` read as empty later (Swift 6.3.1, debug build; the cause was not found).
        self.configuration = configuration
        self.target = target
        connection = try await Self.onQueue(queue) { () throws(FleetError) in
            let connection = try PostgresConnection(configuration.connectionString)
            try FleetSchema.migrate(connection)
            return connection
        }
    }

    // MARK: adding

    /// Adds downloads to the queue; a download whose id is queued already (the same destination) is
    /// left as it is. Returns how many were added.
    ///
    /// Each destination must lie inside `folder` (by default this queue's
    /// ``Configuration/outputFolder``) and is stored by its path relative to it: each worker puts the
    /// file under its own ``Configuration/outputFolder`` (as `haul worker -o`). With `folder`, a row's
    /// id is that of its relative path taken from `/`, the same whoever queues it; without, the
    /// request's ``DownloadRequest/id``. A path that would leave the
    /// folder or land in a state folder (`.haul`) is refused here, and again by each worker that
    /// claims it (``FleetLease/refusal``): rows can be written by anyone with access to the table.
    ///
    /// A fleet's queue holds no secrets: a request with a user name or password in its URL, or with
    /// headers, is refused (give credentials to the workers' managers instead).
    @discardableResult
    public func enqueue(_ requests: [DownloadRequest], relativeTo folder: URL? = nil) async throws(FleetError) -> Int {
        let root = (folder ?? configuration.outputFolder).standardizedFileURL.path
        let base = root.hasSuffix("/") ? root : root + "/"
        var rows: [[String?]] = []
        for request in requests {
            guard !request.url.hasCredentials, request.headers.isEmpty else {
                throw FleetError(
                    .invalidArgument,
                    target: target,
                    detail:
                        "\(request.url.redactedString) carries credentials or headers, which a shared queue never stores"
                )
            }
            let unsupported = [
                ("a checksum", request.checksum != nil), ("an expected size", request.expectedSize != nil),
                ("a user agent", request.userAgent != nil),
                ("a file name from the server", request.takesFileNameFromServer),
                ("a key", request.key != nil), ("a rate limit", request.maxBytesPerSecond != nil),
                ("connections", request.connections != nil), ("mirrors", !request.mirrors.isEmpty),
            ].filter(\.1).map(\.0)
            guard unsupported.isEmpty else {
                throw FleetError(
                    .invalidArgument,
                    target: target,
                    detail:
                        "\(request.url.redactedString) asks for \(unsupported.joined(separator: ", ")), which the fleet queue does not carry yet"
                )
            }
            guard request.destination.isFileURL, request.url.host != nil else {
                throw FleetError(.invalidArgument, target: target, detail: "\(request.url.redactedString) has no host")
            }
            var path = request.destination.standardizedFileURL.path
            guard path.hasPrefix(base), path.count > base.count else {
                throw FleetError(.invalidArgument, target: target, detail: "\(path) is not inside \(base)")
            }
            path.removeFirst(base.count)
            if let refusal = ConfinedPath.refusal(path) {
                throw FleetError(.invalidArgument, target: target, detail: "the destination \(path) \(refusal)")
            }
            // Queued by a folder named here: the relative path's id, whoever queues it; else the
            // request's own, as its caller knows it.
            let id = folder == nil ? request.id : DownloadID(destination: URL(fileURLWithPath: "/" + path))
            rows.append([id.rawValue, request.url.absoluteString, path, request.url.hostKey, String(request.priority)])
        }
        guard !rows.isEmpty else { return 0 }
        let allRows = rows
        return try await run { connection throws(FleetError) -> Int in
            var added = 0
            // One statement per 1,000 rows, as arrays: a parameterised multi-row insert.
            for start in stride(from: 0, to: allRows.count, by: 1000) {
                let chunk = allRows[start..<min(start + 1000, allRows.count)]
                let columns = (0..<5).map { column in FleetSchema.array(chunk.map { $0[column] }) }
                let inserted = try connection.query(
                    """
                    INSERT INTO haul_downloads (id, url, destination, host, priority)
                    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[])
                    ON CONFLICT (id) DO NOTHING RETURNING 1
                    """,
                    columns
                )
                added += inserted.count
            }
            // Fresh statistics after a large batch: without them the planner took the queue for a
            // few rows and sorted all of it for every claim (24 ms instead of 4 for 20,000 rows).
            if added >= 1000 { try connection.query("ANALYZE haul_downloads") }
            return added
        }
    }

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
                try connection.query(FleetSchema.requeueExpired)
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
                WHERE haul_downloads.id = mine.id AND lease_version = mine.version AND owner = $1 AND state = 'running'
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

    // MARK: from any process

    /// Pauses a download: a queued one at once; a running one is asked to, and its worker pauses it
    /// at its next renewal (within a third of the lease). Whether the row was there to pause.
    @discardableResult
    public func pause(_ id: DownloadID) async throws(FleetError) -> Bool {
        try await request(id, .paused)
    }

    /// Cancels a download: a queued or paused one at once; a running one through its worker, as
    /// ``pause(_:)``. Whether the row was there to cancel.
    @discardableResult
    public func cancel(_ id: DownloadID) async throws(FleetError) -> Bool {
        try await request(id, .cancelled)
    }

    /// Queues a paused download again, at the end of its priority's queue. Whether it was paused.
    @discardableResult
    public func resume(_ id: DownloadID) async throws(FleetError) -> Bool {
        try await run { connection throws(FleetError) -> Bool in
            !(try connection.query(
                """
                UPDATE haul_downloads SET state = 'queued', seq = nextval(pg_get_serial_sequence('haul_downloads', 'seq')),
                    last_error = NULL, updated_at = now()
                WHERE id = $1 AND state = 'paused' RETURNING 1
                """,
                [id.rawValue]
            )).isEmpty
        }
    }

    private func request(_ id: DownloadID, _ state: FleetState) async throws(FleetError) -> Bool {
        try await run { connection throws(FleetError) -> Bool in
            let waiting = state == .paused ? "'queued'" : "'queued', 'paused'"
            let settled = try connection.query(
                """
                WITH done AS (
                    UPDATE haul_downloads SET state = $2, updated_at = now()
                    WHERE id = $1 AND state IN (\(waiting)) RETURNING id, state
                )
                SELECT id, pg_notify('haul_downloads', id || ' ' || state) FROM done
                """,
                [id.rawValue, state.rawValue]
            )
            if !settled.isEmpty { return true }
            return
                !(try connection.query(
                    "UPDATE haul_downloads SET requested = $2 WHERE id = $1 AND state = 'running' RETURNING 1",
                    [id.rawValue, state.rawValue]
                )).isEmpty
        }
    }

    /// Waits until download `id` is completed, failed or cancelled, and returns its row: without
    /// polling, on a connection of its own that listens on `haul_downloads` (looking at the row again
    /// at each announcement for it, and at least every 5 s). Throws `CancellationError` when the
    /// calling task is cancelled (within a second), and `invalidArgument` when there is no such row.
    public func outcome(of id: DownloadID) async throws -> FleetEntry {
        let connectionString = configuration.connectionString
        let outputFolder = configuration.outputFolder
        let listening = DispatchQueue(label: "haul.fleet-listener")
        let listener = try await Self.onQueue(listening) { () throws(FleetError) in
            let connection = try PostgresConnection(connectionString)
            try connection.query("LISTEN haul_downloads")
            return connection
        }
        let box = UncheckedBox(listener)
        var sinceLook = ContinuousClock.now
        var look = true
        while true {
            try Task.checkCancellation()
            if look {
                sinceLook = .now
                let row = try await Self.onQueue(listening) { () throws(FleetError) -> [String?]? in
                    try box.value.query(
                        FleetSchema.entryByID,
                        [id.rawValue]
                    )
                    .first
                }
                guard let row, let entry = FleetEntry(row: row, outputFolder: outputFolder) else {
                    throw FleetError(.invalidArgument, target: target, detail: "no download \(id) in the queue")
                }
                if [.completed, .failed, .cancelled].contains(entry.state) { return entry }
            }
            // Waits on the listening socket for at most a second (then looks at the cancellation).
            let announced = try await Self.onQueue(listening) {
                () throws(FleetError) -> [(channel: String, payload: String)] in
                var descriptor = pollfd(fd: box.value.socket, events: Int16(POLLIN), revents: 0)
                _ = poll(&descriptor, 1, 1000)
                return try box.value.notifications()
            }
            look =
                announced.contains { $0.payload.hasPrefix(id.rawValue + " ") }
                || ContinuousClock.now - sinceLook >= .seconds(5)
        }
    }

    /// Records a download as completed with `bytes`, if `lease` is still the row's: whether it was
    /// (`false`: another worker holds it now, and nothing was recorded).
    public func complete(_ lease: FleetLease, bytes: Int64) async throws(FleetError) -> Bool {
        try await record([FleetOutcome(lease, .completed(bytes: bytes))]).contains(lease.id)
    }

    /// Records a download as failed for good with `reason`, if `lease` is still the row's.
    public func fail(_ lease: FleetLease, reason: String) async throws(FleetError) -> Bool {
        try await record([FleetOutcome(lease, .failed(reason: reason))]).contains(lease.id)
    }

    /// Records many outcomes in one statement, each only if its lease is still the row's, and
    /// announces each recorded one on `haul_downloads`: the ids recorded (the others' leases were
    /// taken over, and nothing was written for them).
    public func record(_ outcomes: [FleetOutcome]) async throws(FleetError) -> Set<DownloadID> {
        try await end(
            outcomes.map(\.lease),
            states: outcomes.map(\.state),
            bytes: outcomes.map { if case .completed(let bytes) = $0.result { bytes } else { nil } },
            errors: outcomes.map { if case .failed(let reason) = $0.result { reason } else { nil } }
        )
    }

    /// Ends running rows under their leases (``FleetSchema/record``): the ids ended.
    private func end(_ leases: [FleetLease], states: [FleetState], bytes: [Int64?], errors: [String?])
        async throws(FleetError) -> Set<DownloadID>
    {
        guard !leases.isEmpty else { return [] }
        let parameters: [String?] =
            [configuration.worker] + FleetSchema.leaseArrays(leases) + [
                FleetSchema.array(states.map(\.rawValue)), FleetSchema.array(bytes.map { $0.map(String.init) }),
                FleetSchema.array(errors),
            ]
        return try await run { connection throws(FleetError) -> Set<DownloadID> in
            // pg_notify's messages are delivered at the statement's commit, with its rows.
            let rows = try connection.query(FleetSchema.record, parameters)
            return Set(rows.compactMap { $0[0].map(DownloadID.init(rawValue:)) })
        }
    }

    /// Gives leased rows back to the queue (in their old places) for any worker to take: a worker
    /// that stops. Rows whose lease is no longer this worker's are left alone. Returns how many.
    @discardableResult
    public func release(_ leases: [FleetLease]) async throws(FleetError) -> Int {
        guard !leases.isEmpty else { return 0 }
        let worker = configuration.worker
        return try await run { connection throws(FleetError) -> Int in
            try connection.query(
                """
                UPDATE haul_downloads SET state = 'queued', owner = NULL, lease_expires = NULL, updated_at = now()
                FROM unnest($2::text[], $3::bigint[]) AS mine(id, version)
                WHERE haul_downloads.id = mine.id AND lease_version = mine.version AND owner = $1 AND state = 'running'
                RETURNING 1
                """,
                [worker] + FleetSchema.leaseArrays(leases)
            ).count
        }
    }

    // MARK: reading

    /// The queue's row for `id`, or `nil`.
    public func entry(_ id: DownloadID) async throws(FleetError) -> FleetEntry? {
        let outputFolder = configuration.outputFolder
        return try await run { connection throws(FleetError) -> FleetEntry? in
            try connection.query(FleetSchema.entryByID, [id.rawValue])
                .first.flatMap { FleetEntry(row: $0, outputFolder: outputFolder) }
        }
    }

    /// Every row in the fleet's order (priority, then first in), at most `limit`, after `offset`.
    public func entries(limit: Int = 1000, offset: Int = 0) async throws(FleetError) -> [FleetEntry] {
        let outputFolder = configuration.outputFolder
        return try await run { connection throws(FleetError) -> [FleetEntry] in
            try connection.query(
                "SELECT \(FleetSchema.entryColumns) FROM haul_downloads ORDER BY priority DESC, seq LIMIT $1 OFFSET $2",
                [String(max(0, limit)), String(max(0, offset))]
            ).compactMap { FleetEntry(row: $0, outputFolder: outputFolder) }
        }
    }

    /// How many rows are in each state.
    public func counts() async throws(FleetError) -> [FleetState: Int] {
        try await run { connection throws(FleetError) -> [FleetState: Int] in
            var counts: [FleetState: Int] = [:]
            for row in try connection.query("SELECT state, count(*) FROM haul_downloads GROUP BY state") {
                if let state = row[0].flatMap(FleetState.init(rawValue:)), let count = row[1].flatMap({ Int($0) }) {
                    counts[state] = count
                }
            }
            return counts
        }
    }

    // MARK: internals

    private func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws(FleetError) -> T)
        async throws(FleetError) -> T
    {
        let connection = UncheckedBox(connection)
        return try await Self.onQueue(queue) { () throws(FleetError) -> T in try body(connection.value) }
    }

    private static func onQueue<T>(_ queue: DispatchQueue, _ body: @escaping () throws(FleetError) -> T)
        async throws(FleetError) -> T
    {
        let result: Result<UncheckedBox<T>, FleetError> = await withCheckedContinuation { continuation in
            let body = UncheckedBox(body)
            queue.async {
                do throws(FleetError) {
                    continuation.resume(returning: .success(UncheckedBox(try body.value())))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get().value
    }
}

/// A value handed between the caller and the queue's serial queue, which alone touches it.
private struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
