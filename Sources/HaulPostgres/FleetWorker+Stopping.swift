import Haul

extension FleetWorker {
    /// Stopping: what ended is recorded (one try: the leases expire otherwise); each transfer pauses,
    /// and once the manager is idle each held download's row says how it stands: a completed one is
    /// recorded, the others go back to the queue. Throws `failure`, or the record's own failure.
    func stopWorking(
        _ held: Held,
        ended: [(FleetLease, Ending)],
        failure: (any Error)?,
        reader: Task<Void, Never>
    ) async throws {
        var (ended, failure) = (ended, failure)
        let stillHeld = held.leases.filter { !held.lost.contains($0.key) }
        for id in stillHeld.keys { manager.download(id: id)?.askToPause() }
        await manager.waitUntilIdle()
        reader.cancel()
        // Lost leases whose pause came after the last turn: their bytes go to the taker too.
        handOver(held.lost.compactMap { held.leases[$0] })
        for (id, lease) in stillHeld {
            let entry = manager.journalEntry(id: id)
            switch entry?.state {
            case .completed?:
                ended.append((lease, .completed(lease.destination)))
            case .failed?:
                ended.append((lease, .failed(reason: entry?.lastError ?? "failed")))
            default:
                ended.append((lease, .paused))
            }
        }
        do {
            try await record(ended, requested: held.requested)
        } catch let error as FleetError {
            failure = failure ?? error
        } catch {
            // Cancelled while the database could not be reached: the leases expire instead.
        }
        if let failure { throw failure }
    }
}
