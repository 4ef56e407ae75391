import FoundationEssentials
import Glibc
import Haul

/// Bytes that move between workers through the shared folder: taken from a worker that is gone,
/// handed over by one that still runs and lost a lease.
extension FleetWorker {
    /// A held lease waiting for the bytes its previous worker, which still runs, is to hand over.
    struct Awaited {
        let lease: FleetLease
        /// When it was claimed: it starts without them a lease's length later.
        let since: ContinuousClock.Instant
    }

    /// The folder in `shared` where `worker` hands over the bytes of leases it lost while running
    /// (inside its state directory), or `nil` for a name that cannot be a folder.
    static func handOverDirectory(in shared: URL, worker: String) -> URL? {
        stateDirectory(in: shared, worker: worker)?.appendingPathComponent("handover", isDirectory: true)
    }

    /// Moves into this worker's state directory what the previous workers of `leases` left in
    /// theirs, in a shared folder, so that each download continues from those bytes. A previous
    /// worker still running keeps its directory locked: the leases it lost (they expired there) are
    /// returned, to wait for its hand-over (``startAwaited(_:)``); the others start over.
    func takeOverBytes(of leases: [FleetLease]) -> [FleetLease] {
        guard let shared = sharedStateDirectory else { return [] }
        var awaited: [FleetLease] = []
        let me = queue.configuration.worker
        var byWorker: [String: [FleetLease]] = [:]
        for lease in leases {
            if let previous = lease.previousWorker, previous != me { byWorker[previous, default: []].append(lease) }
        }
        for (previous, leases) in byWorker {
            guard let directory = Self.stateDirectory(in: shared, worker: previous) else { continue }
            do {
                let taken = try manager.takeOver(leases.map(\.request), from: directory)
                for (id, bytes) in taken {
                    logger.info(
                        "continues from the bytes another worker left",
                        metadata: ["haul.download.id": "\(id)", "haul.worker": "\(previous)", "haul.bytes": "\(bytes)"]
                    )
                }
            } catch let error as DownloadError where error.code == .journalLocked {
                // Taken from a lease that ran out there: that worker hands the bytes over once it
                // learns (or did already); ``startAwaited(_:)`` looks.
                let waiting = leases.filter(\.previousLeaseExpired)
                awaited += waiting
                logger.debug(
                    "the previous worker still runs: what it hands over is awaited, the rest starts over here",
                    metadata: ["haul.worker": "\(previous)", "haul.awaited": "\(waiting.count)"]
                )
            } catch {
                logger.warning(
                    "could not take over another worker's bytes: its downloads start over here",
                    metadata: ["haul.worker": "\(previous)", "haul.error": "\(error)"]
                )
            }
        }
        return awaited
    }

    /// Starts each awaited lease whose bytes were handed over (continuing from them), whose previous
    /// worker stopped or no longer has them, or that waited a lease's length (starting over).
    func startAwaited(_ held: inout Held) async throws {
        guard let shared = sharedStateDirectory else { return }
        var ready: [FleetLease] = []
        for (id, awaited) in held.awaiting {
            let lease = awaited.lease
            guard let previous = lease.previousWorker,
                let directory = Self.stateDirectory(in: shared, worker: previous),
                let handOver = Self.handOverDirectory(in: shared, worker: previous)
            else {
                ready.append(lease)
                continue
            }
            // Whether that worker's journal still has it unfinished with bytes: looked at before the
            // hand-over folder, since the row leaves the journal only after it is in that folder
            // (a row gone here is found there).
            let stillThere =
                DownloadManager.journalEntry(id: id, stateDirectory: directory).map {
                    $0.state.isUnfinished && $0.bytesReceived > 0
                } ?? false
            do {
                if let bytes = try manager.takeOver([lease.request], from: handOver)[id] {
                    logger.info(
                        "continues from the bytes another worker handed over",
                        metadata: [
                            "haul.download.id": "\(lease.id)", "haul.worker": "\(previous)", "haul.bytes": "\(bytes)",
                        ]
                    )
                    ready.append(lease)
                    continue
                }
            } catch let error as DownloadError where error.code == .journalLocked {
                continue  // being swept or written: looked at again next turn
            } catch {
                logger.warning(
                    "could not take what another worker handed over: the download starts over here",
                    metadata: ["haul.worker": "\(previous)", "haul.error": "\(error)"]
                )
                ready.append(lease)
                continue
            }
            if !stillThere {
                ready.append(lease)
            } else if (try? manager.takeOver([lease.request], from: directory)) != nil {
                ready.append(lease)  // that worker stopped meanwhile: what it left moved here
            } else if ContinuousClock.now - awaited.since >= queue.configuration.leaseDuration {
                logger.info(
                    "another worker did not hand its bytes over in a lease's time: the download starts over here",
                    metadata: ["haul.download.id": "\(lease.id)", "haul.worker": "\(previous)"]
                )
                ready.append(lease)
            }
        }
        guard !ready.isEmpty else { return }
        for lease in ready { held.awaiting[lease.requestID] = nil }
        let refused = try start(ready, in: &held)
        if !refused.isEmpty { try await record(refused, requested: [:]) }
    }

    /// Hands the paused downloads of `leases`, lost to other workers, over to them: their rows and
    /// partial files move into this worker's hand-over folder, where the taker finds them.
    func handOver(_ leases: [FleetLease]) {
        guard !leases.isEmpty, let shared = sharedStateDirectory,
            let directory = Self.handOverDirectory(in: shared, worker: queue.configuration.worker)
        else { return }
        do {
            let handed = try manager.handOver(leases.map(\.requestID), to: directory)
            for lease in leases {
                guard let bytes = handed[lease.requestID] else { continue }
                logger.info(
                    "handed the bytes of a lost lease over to its taker",
                    metadata: ["haul.download.id": "\(lease.id)", "haul.bytes": "\(bytes)"]
                )
            }
        } catch {
            logger.warning(
                "could not hand the bytes of lost leases over: their takers start over",
                metadata: ["haul.error": "\(error)"]
            )
        }
    }

    /// Every two leases' length, removes from this worker's hand-over folder what was there at the
    /// last sweep too: a taker waits a lease's length at most, so nobody will take it.
    func sweepHandOvers(_ held: inout Held) {
        let now = ContinuousClock.now
        guard now - held.sweptAt >= queue.configuration.leaseDuration * 2, let shared = sharedStateDirectory,
            let directory = Self.handOverDirectory(in: shared, worker: queue.configuration.worker)
        else { return }
        held.sweptAt = now
        guard let entries = try? DownloadManager.journalEntries(stateDirectory: directory) else {
            held.handedOverAtSweep = []
            return
        }
        let present = Set(entries.map(\.id))
        let stale = present.intersection(held.handedOverAtSweep)
        held.handedOverAtSweep = present.subtracting(stale)
        guard !stale.isEmpty else { return }
        do {
            let removed = try DownloadManager.removeDownloads(Array(stale), stateDirectory: directory)
            logger.info("removed bytes handed over that nobody took", metadata: ["haul.downloads": "\(removed)"])
        } catch {
            held.handedOverAtSweep.formUnion(stale)  // (taken meanwhile, or locked): next sweep
        }
    }
}
