import Foundation
import Haul
import Logging

/// Works through a ``FleetQueue`` with a ``DownloadManager``: claims rows while it has room, fetches
/// each with the manager (its own journal and partial files), records the outcome under its lease,
/// and renews its leases.
///
/// - A download whose lease is lost (another worker took the row over after this one missed its
///   renewals) is cancelled here, and nothing is recorded for it: the other worker's outcome counts.
/// - ``run()`` works until its task is cancelled; then it pauses its transfers (the bytes stay in
///   the manager's state directory), gives their rows back to the queue for any worker, and returns.
///   A worker that is killed instead loses its rows when their leases expire.
/// - While the database cannot be reached (a restart), the transfers go on and every statement is
///   tried again, up to every 5 s; leases that expired meanwhile are found lost at the next renewal.
/// - A download that fails for good (a 404, a checksum) is recorded as failed with the error's text
///   (never credentials: the queue holds none, and ``DownloadError`` redacts them).
public final class FleetWorker: Sendable {
    /// The queue it works through.
    public let queue: FleetQueue
    /// The manager that downloads.
    public let manager: DownloadManager
    /// How many rows it holds at once.
    public let concurrency: Int
    /// How long it waits before looking at an empty queue again.
    public let pollInterval: Duration
    private let logger: Logger

    /// A worker for `queue` that downloads with `manager`, at most `concurrency` at once.
    public init(
        queue: FleetQueue,
        manager: DownloadManager,
        concurrency: Int,
        pollInterval: Duration = .milliseconds(500),
        logger: Logger = Logger(label: "haul.fleet")
    ) {
        self.queue = queue
        self.manager = manager
        self.concurrency = max(1, concurrency)
        self.pollInterval = pollInterval
        self.logger = logger
    }

    private enum Event: Sendable {
        case tick
        case ended(FleetLease, Result<URL, any Error>)
        /// Records what ended so far and claims again: queued behind the `.ended` that found none
        /// pending, so that every download that ended meanwhile is recorded in the same statement.
        case flush
    }

    /// Works until cancelled (see the type's description), or with `untilEmpty` until a claim finds
    /// nothing while it holds nothing (a batch job's end). Throws when the queue's database fails
    /// (after pausing and giving back what it held, as far as the database lets it).
    public func run(untilEmpty: Bool = false) async throws {
        let (events, continuation) = AsyncStream.makeStream(of: Event.self)
        let renewEvery = queue.configuration.leaseDuration / 3
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: min(renewEvery, pollInterval))
                continuation.yield(.tick)
            }
        }
        defer { ticker.cancel() }
        var held: [DownloadID: (lease: FleetLease, task: Task<Void, Never>)] = [:]
        var lost: Set<DownloadID> = []
        var requested: [DownloadID: FleetState] = [:]
        var ended: [(FleetLease, Result<URL, any Error>)] = []
        var renewedAt = ContinuousClock.now
        var failure: (any Error)?
        do {
            try await claim(into: &held, continuation)
            for await event in events {
                if untilEmpty, held.isEmpty, ended.isEmpty { break }
                switch event {
                case .tick:
                    if ContinuousClock.now - renewedAt >= renewEvery {
                        renewedAt = .now
                        let leases = held.values.map(\.lease)
                        let renewal = try await persisting("renew") { try await queue.renew(leases) }
                        for (lease, state) in renewal.requested
                        where requested.updateValue(state, forKey: lease.id) == nil {
                            // Asked by another process: a pause pauses here (bytes kept), a cancel cancels.
                            if state == .cancelled {
                                manager.download(id: lease.request.id)?.cancel()
                            } else {
                                held[lease.id]?.task.cancel()
                            }
                        }
                        for lease in renewal.lost where lost.insert(lease.id).inserted {
                            logger.warning(
                                "a lease was taken over: the download stops here",
                                metadata: ["haul.download.id": "\(lease.id)", "haul.url": "\(lease.url)"]
                            )
                            manager.download(id: lease.request.id)?.cancel()
                        }
                    }
                case .ended(let lease, let result):
                    held[lease.id] = nil
                    guard lost.remove(lease.id) == nil else {
                        requested[lease.id] = nil  // another worker's now: nothing to settle
                        continue
                    }
                    if ended.isEmpty { continuation.yield(.flush) }
                    ended.append((lease, result))
                    continue
                case .flush:
                    let batch = ended
                    ended.removeAll()
                    try await record(batch, requested: requested)
                    for (lease, _) in batch { requested[lease.id] = nil }
                }
                try await claim(into: &held, continuation)
                if untilEmpty, held.isEmpty, ended.isEmpty { break }
            }
        } catch {
            failure = error
        }
        // Stopping: what ended is recorded (one try: the leases expire otherwise), each transfer
        // pauses (its fetch's task is cancelled), then its row goes back.
        do {
            try await record(ended, requested: requested)
        } catch {
            failure = failure ?? error
        }
        for (_, entry) in held { entry.task.cancel() }
        for (_, entry) in held { await entry.task.value }
        let leases = held.values.map(\.lease).filter { !lost.contains($0.id) }
        do {
            try await persisting("release") { try await queue.release(leases) }
        } catch let error as FleetError {
            failure = failure ?? error
        } catch {
            // Cancelled while the database could not be reached: the leases expire instead.
        }
        if let failure { throw failure }
    }

    private func claim(
        into held: inout [DownloadID: (lease: FleetLease, task: Task<Void, Never>)],
        _ continuation: AsyncStream<Event>.Continuation
    ) async throws {
        guard !Task.isCancelled, held.count < concurrency else { return }
        let room = concurrency - held.count
        let claimed = try await persisting("claim") { try await queue.claim(upTo: room) }
        for lease in claimed {
            let manager = manager
            held[lease.id] = (
                lease,
                Task {
                    let result: Result<URL, any Error>
                    do {
                        result = .success(try await manager.fetch(lease.request))
                    } catch {
                        result = .failure(error)
                    }
                    continuation.yield(.ended(lease, result))
                }
            )
        }
    }

    /// Runs `operation` again while the queue's database cannot be reached (restarted, cut off),
    /// after 0.2 s, then twice as long each time up to 5 s; the transfers go on meanwhile. A refused
    /// statement, or the task's cancellation, ends it (the leases then expire for other workers).
    @discardableResult
    private func persisting<T>(_ what: String, _ operation: () async throws -> T) async throws -> T {
        var delay = Duration.milliseconds(200)
        while true {
            do {
                return try await operation()
            } catch let error as FleetError {
                guard error.code == .connection, !Task.isCancelled else { throw error }
                logger.warning(
                    "the queue's database cannot be reached: trying again",
                    metadata: ["haul.operation": "\(what)", "haul.error": "\(error)"]
                )
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
        }
    }

    /// Records the outcomes of downloads that ended, in one statement; gives back the rows of those
    /// paused or cancelled here.
    private func record(_ batch: [(FleetLease, Result<URL, any Error>)], requested: [DownloadID: FleetState])
        async throws
    {
        var outcomes: [FleetOutcome] = []
        var released: [FleetLease] = []
        var settled: [FleetState: [FleetLease]] = [:]
        for (lease, result) in batch {
            if let state = requested[lease.id], case .failure = result {
                settled[state, default: []].append(lease)  // paused or cancelled as asked
                continue
            }
            switch result {
            case .success(let file):
                var status = stat()
                let bytes = stat(file.path, &status) == 0 ? Int64(status.st_size) : 0
                outcomes.append(FleetOutcome(lease, .completed(bytes: bytes)))
            case .failure(is CancellationError):
                released.append(lease)  // paused here: any worker may take it
            case .failure(let error as DownloadError) where error.code == .cancelled || error.code == .shutdown:
                released.append(lease)  // cancelled in this process, or its manager shut down
            case .failure(let error):
                outcomes.append(FleetOutcome(lease, .failed(reason: "\(error)")))
            }
        }
        let recorded = try await persisting("record") { try await queue.record(outcomes) }
        for outcome in outcomes where !recorded.contains(outcome.lease.id) {
            logger.warning(
                "an outcome came after the lease was taken over: not recorded",
                metadata: ["haul.download.id": "\(outcome.lease.id)", "haul.url": "\(outcome.lease.url)"]
            )
        }
        if !released.isEmpty { try await persisting("release") { try await queue.release(released) } }
        for (state, leases) in settled {
            try await persisting("settle") { try await queue.settle(leases, as: state) }
        }
    }
}
