import Dispatch
import FoundationEssentials
import Glibc
import Haul

/// Pausing, resuming, cancelling and waiting for downloads, from any process.
extension FleetQueue {
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
                UPDATE haul_downloads SET state = '\(FleetState.target(of: .resumed)!.rawValue)',
                    seq = nextval(pg_get_serial_sequence('haul_downloads', 'seq')), last_error = NULL, updated_at = now()
                WHERE id = $1 AND \(FleetState.sqlCondition(accepting: .resumed)) RETURNING 1
                """,
                [id.rawValue]
            )).isEmpty
        }
    }

    func request(_ id: DownloadID, _ state: FleetState) async throws(FleetError) -> Bool {
        try await run { connection throws(FleetError) -> Bool in
            let event: FleetEvent = state == .paused ? .pauseAsked : .cancelAsked
            let settled = try connection.query(
                """
                WITH done AS (
                    UPDATE haul_downloads SET state = $2, updated_at = now()
                    WHERE id = $1 AND \(FleetState.sqlCondition(accepting: event)) RETURNING id, state
                )
                SELECT id, pg_notify('haul_downloads', id || ' ' || state) FROM done
                """,
                [id.rawValue, state.rawValue]
            )
            if !settled.isEmpty { return true }
            return
                !(try connection.query(
                    "UPDATE haul_downloads SET requested = $2 WHERE id = $1 AND "
                        + "\(FleetState.sqlCondition(accepting: event, asking: true)) RETURNING 1",
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
    public func fail(
        _ lease: FleetLease,
        reason: String,
        category: DownloadError.Category? = nil
    ) async throws(FleetError) -> Bool {
        try await record([FleetOutcome(lease, .failed(reason: reason), category: category)]).contains(lease.id)
    }

    /// Records many outcomes in one statement, each only if its lease is still the row's, and
    /// announces each recorded one on `haul_downloads`: the ids recorded (the others' leases were
    /// taken over, and nothing was written for them).
    public func record(_ outcomes: [FleetOutcome]) async throws(FleetError) -> Set<DownloadID> {
        try await end(
            outcomes.map(\.lease),
            states: outcomes.map(\.state),
            bytes: outcomes.map { if case .completed(let bytes) = $0.result { bytes } else { nil } },
            errors: outcomes.map { if case .failed(let reason) = $0.result { reason } else { nil } },
            classes: outcomes.map { $0.category?.name }
        )
    }

    /// Ends running rows under their leases (``FleetSchema/record``): the ids ended.
    func end(
        _ leases: [FleetLease],
        states: [FleetState],
        bytes: [Int64?],
        errors: [String?],
        classes: [String?]? = nil
    ) async throws(FleetError) -> Set<DownloadID> {
        guard !leases.isEmpty else { return [] }
        // Only a worker's outcomes end a running row (FleetSchema.record's condition is theirs).
        precondition(states.allSatisfy { $0.recordedEvent != nil }, "\(states) are not outcomes")
        let parameters: [String?] =
            [configuration.worker] + FleetSchema.leaseArrays(leases) + [
                FleetSchema.array(states.map(\.rawValue)), FleetSchema.array(bytes.map { $0.map(String.init) }),
                FleetSchema.array(errors), FleetSchema.array(classes ?? errors.map { _ in nil }),
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
                UPDATE haul_downloads SET state = '\(FleetState.target(of: .released)!.rawValue)', owner = NULL,
                    lease_expires = NULL, updated_at = now()
                FROM unnest($2::text[], $3::bigint[]) AS mine(id, version)
                WHERE haul_downloads.id = mine.id AND lease_version = mine.version AND owner = $1
                    AND \(FleetState.sqlCondition(accepting: .released))
                RETURNING 1
                """,
                [worker] + FleetSchema.leaseArrays(leases)
            ).count
        }
    }
}
