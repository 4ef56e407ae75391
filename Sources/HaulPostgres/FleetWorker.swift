import FoundationEssentials
import Glibc
import Haul
import Logging
import Synchronization

/// Works through a ``FleetQueue`` with a ``DownloadManager``: claims rows while it has room, downloads
/// them with the manager (its own journal and partial files; each claimed batch is one `enqueue`, and
/// outcomes come from the manager's ``DownloadManager/events``), records the outcomes under their
/// leases, and renews its leases. Give it a manager of its own: it waits for that manager to be idle
/// when it stops.
///
/// - A download whose lease is lost (another worker took the row over after this one missed its
///   renewals) stops here, and nothing is recorded for it: the other worker's outcome counts. With
///   a ``sharedStateDirectory`` it pauses and its bytes are handed over to the taker, which waits
///   for them up to a lease's length (``DownloadManager/handOver(_:to:)``); else it is cancelled.
/// - ``run()`` works until its task is cancelled; then it pauses its transfers (the bytes stay in
///   the manager's state directory), gives their rows back to the queue for any worker, and returns.
///   A worker that is killed instead loses its rows when their leases expire.
/// - While the database cannot be reached (a restart), the transfers go on and every statement is
///   tried again, up to every 5 s or a third of the lease if that is shorter: back within the
///   lease's length of the server's start, which is how long leases of before are kept for their
///   workers to renew; leases that expired otherwise are found lost at the next renewal.
/// - A download that fails for good (a 404, a checksum) is recorded as failed with the error's text
///   (never credentials: the queue holds none, and ``DownloadError`` redacts them).
/// - Where the bytes are: each worker's manager keeps its partial files in its own state directory.
///   With those directories in one folder on storage every worker shares
///   (``sharedStateDirectory``, each named after its worker), a row taken over from a worker that
///   is gone (killed, stopped) continues from the bytes it left, with the usual validator rules
///   (``DownloadManager/takeOver(_:from:)``); one taken from a worker that still runs continues
///   from the bytes that worker hands over (``DownloadManager/handOver(_:to:)``). With local state
///   directories it starts over.
public final class FleetWorker: Sendable {
    /// The queue it works through.
    public let queue: FleetQueue
    /// The manager that downloads.
    public let manager: DownloadManager
    /// How many rows it holds at once.
    public let concurrency: Int
    /// The folder on shared storage that holds every worker's state directory, or `nil`.
    public let sharedStateDirectory: URL?
    /// How long it waits before looking at an empty queue again.
    public let pollInterval: Duration
    /// What each claimed request gets before the manager runs it (credentials in its URL, headers).
    private let prepare: (@Sendable (DownloadRequest) -> DownloadRequest)?
    /// The database could not be reached since the last claim: the held leases are renewed before
    /// the next claim, which may take others' expired ones.
    private let reconnected = Atomic<Bool>(false)
    /// Where this worker's log lines go.
    let logger: Logger

    /// A worker for `queue` that downloads with `manager`, at most `concurrency` at once.
    ///
    /// - Parameter sharedStateDirectory: a folder on storage every worker shares (a mounted volume)
    ///   in which each worker's manager has its state directory,
    ///   ``stateDirectory(in:worker:)`` (this one's too: give `manager` that one). A row another
    ///   worker held before (``FleetLease/previousWorker``) is then taken over with its bytes when
    ///   that worker is gone. `nil`: state directories are each worker's own, and a row taken over
    ///   starts over.
    /// - Parameter prepare: gives each claimed request what a shared queue never holds, before the
    ///   manager runs it: a user and password in its URL (``DownloadRequest/url``), headers of its
    ///   own (``DownloadRequest/headers``). The manager keeps them in memory only, and sends them to
    ///   the URL's origin only. It must not change the request's destination (its id). Headers for
    ///   every request are the manager's ``DownloadManager/Configuration/headers``.
    public init(
        queue: FleetQueue,
        manager: DownloadManager,
        concurrency: Int,
        sharedStateDirectory: URL? = nil,
        pollInterval: Duration = .milliseconds(500),
        logger: Logger = Logger(label: "haul.fleet"),
        prepare: (@Sendable (DownloadRequest) -> DownloadRequest)? = nil
    ) {
        self.queue = queue
        self.manager = manager
        self.concurrency = max(1, concurrency)
        self.sharedStateDirectory = sharedStateDirectory
        self.pollInterval = pollInterval
        self.prepare = prepare
        self.logger = logger
    }

    /// The state directory of `worker` in a shared folder: a folder named after it, or `nil` for a
    /// name that cannot be one (empty, `.`, `..`, or with a `/`).
    public static func stateDirectory(in shared: URL, worker: String) -> URL? {
        guard !worker.isEmpty, worker != ".", worker != "..", !worker.contains("/") else { return nil }
        return shared.appendingPathComponent(worker, isDirectory: true)
    }

    /// How a download this worker holds ended in its manager.
    enum Ending: Sendable {
        case completed(URL)
        /// Failed for good, with the error's text (credentials redacted) and its class when known.
        case failed(reason: String, category: DownloadError.Category? = nil)
        /// Cancelled here (a lost lease, a cancel asked for), or its manager shut down.
        case cancelled
        /// Paused here (a pause asked for, or the worker stopping).
        case paused
    }

    private enum Event: Sendable {
        case tick
        /// A download of the manager ended (by its request's id).
        case ended(DownloadID, Ending)
        /// Records what ended so far, then claims (not before: ``run()``): queued behind the `.ended`
        /// that found none pending, so that every download that ended meanwhile is in one statement.
        case flush
    }

    /// What the worker holds, by the id of the request its manager runs.
    struct Held {
        var leases: [DownloadID: FleetLease] = [:]
        /// Leases taken over by another worker: their downloads stop here (paused and handed over,
        /// or cancelled).
        var lost: Set<DownloadID> = []
        /// What another process asked of a held download ('paused' or 'cancelled').
        var requested: [DownloadID: FleetState] = [:]
        /// Held leases not started yet: their previous worker still runs and is to hand their bytes
        /// over; each starts when they come, or at its time limit.
        var awaiting: [DownloadID: Awaited] = [:]
        /// Held leases that ended without running here (awaited, then paused or cancelled from
        /// another process): reported as ended on the worker's next turn.
        var endedUnstarted: [(DownloadID, Ending)] = []
        /// What this worker's hand-over folder held at its last sweep (``sweepHandOvers(_:)``).
        var handedOverAtSweep: Set<DownloadID> = []
        var sweptAt = ContinuousClock.now
    }

    /// Works until cancelled (see the type's description), or with `untilEmpty` until a claim finds
    /// nothing while it holds nothing (a batch job's end). Throws when the queue's database fails
    /// (after pausing and giving back what it held, as far as the database lets it).
    ///
    /// Each batch of claimed rows goes to the manager in one `enqueue` (journal rows in one
    /// transaction, no task per download), and outcomes come from the manager's feed by id.
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
        let reader = await followOutcomes(into: continuation)
        var held = Held()
        var ended: [(FleetLease, Ending)] = []
        var renewedAt = ContinuousClock.now
        var failure: (any Error)?
        do {
            try await claim(into: &held)
            for await event in events {
                if untilEmpty, held.leases.isEmpty, ended.isEmpty { break }
                switch event {
                case .tick:
                    if ContinuousClock.now - renewedAt >= renewEvery {
                        renewedAt = .now
                        try await renew(&held)
                    }
                    if !held.awaiting.isEmpty { try await startAwaited(&held) }
                    sweepHandOvers(&held)
                    // A pause whose event the feed dropped (it keeps final events only, when a
                    // reader falls 4,096 behind): the journal says it.
                    for (id, state) in held.requested where state == .paused && held.leases[id] != nil {
                        if manager.journalEntry(id: id)?.state == .paused { continuation.yield(.ended(id, .paused)) }
                    }
                case .ended(let id, let ending):
                    guard let lease = held.leases.removeValue(forKey: id) else { continue }  // not held
                    guard held.lost.remove(id) == nil else {
                        held.requested[id] = nil  // another worker's now: nothing to settle
                        if case .paused = ending { handOver([lease]) }
                        continue
                    }
                    if ended.isEmpty { continuation.yield(.flush) }
                    ended.append((lease, ending))
                    continue
                case .flush:
                    let batch = ended
                    ended.removeAll()
                    try await record(batch, requested: held.requested)
                    for (lease, _) in batch { held.requested[lease.requestID] = nil }
                }
                if ended.isEmpty { try await claim(into: &held) }
                for (id, ending) in held.endedUnstarted { continuation.yield(.ended(id, ending)) }
                held.endedUnstarted.removeAll()
                if untilEmpty, held.leases.isEmpty, ended.isEmpty { break }
            }
        } catch {
            failure = error
        }
        try await stopWorking(held, ended: ended, failure: failure, reader: reader)
    }

    /// Follows the manager's feed, turning each download's end into an ``Event`` for the run, from
    /// before the first claim: a download that ends at once (its file already complete here) is seen
    /// too. Returns once subscribed; cancel the task to stop following.
    private func followOutcomes(into continuation: AsyncStream<Event>.Continuation) async -> Task<Void, Never> {
        let (subscription, subscribed) = AsyncStream.makeStream(of: Void.self)
        let reader = Task { [manager] in
            var feed = manager.events.makeAsyncIterator()
            subscribed.finish()
            while let event = await feed.next() {
                switch event.event {
                case .completed(let file): continuation.yield(.ended(event.id, .completed(file)))
                case .failed(let error) where error.code == .cancelled || error.code == .shutdown:
                    continuation.yield(.ended(event.id, .cancelled))
                case .failed(let e): continuation.yield(.ended(event.id, .failed(reason: "\(e)", category: e.category)))
                case .cancelled: continuation.yield(.ended(event.id, .cancelled))
                case .paused: continuation.yield(.ended(event.id, .paused))
                default: continue
                }
            }
        }
        for await _ in subscription {}
        return reader
    }

    /// Renews the held leases; acts on what another process asked (a pause pauses here, bytes kept;
    /// a cancel cancels) and on leases lost (the download is cancelled here).
    private func renew(_ held: inout Held) async throws {
        let leases = Array(held.leases.values)
        let renewal = try await persisting("renew") { try await queue.renew(leases) }
        for (lease, state) in renewal.requested
        where held.requested.updateValue(state, forKey: lease.requestID) == nil {
            if held.awaiting.removeValue(forKey: lease.requestID) != nil {
                held.endedUnstarted.append((lease.requestID, state == .cancelled ? .cancelled : .paused))
                continue
            }
            let download = manager.download(id: lease.requestID)
            if state == .cancelled { download?.askToCancel() } else { download?.askToPause() }
        }
        for lease in renewal.lost {
            if held.awaiting.removeValue(forKey: lease.requestID) != nil {
                held.leases[lease.requestID] = nil  // never started here: nothing to stop
                continue
            }
            guard held.lost.insert(lease.requestID).inserted else { continue }
            logger.warning(
                "a lease was taken over: the download stops here",
                metadata: ["haul.download.id": "\(lease.id)", "haul.url": "\(lease.url)"]
            )
            // Paused and handed over where the taker can reach this worker's bytes; else cancelled.
            let download = manager.download(id: lease.requestID)
            if sharedStateDirectory != nil { download?.askToPause() } else { download?.askToCancel() }
        }
    }

    /// Claims rows while there is room and hands them to the manager in one `enqueue`.
    private func claim(into held: inout Held) async throws {
        // A claim whose every row was refused leaves the room free: the next rows take it.
        while try await claimOnce(into: &held) {}
    }

    /// One claim; whether it took rows and refused every one of them.
    private func claimOnce(into held: inout Held) async throws -> Bool {
        guard !Task.isCancelled, held.leases.count < concurrency else { return false }
        // Back after an outage: what this worker holds is renewed first, so that it is not among
        // the expired leases the claim gives to whoever asks.
        if reconnected.exchange(false, ordering: .relaxed), !held.leases.isEmpty { try await renew(&held) }
        let room = concurrency - held.leases.count
        let claimed = try await persisting("claim") { try await queue.claim(upTo: room) }
        guard !claimed.isEmpty else { return false }
        // A row aimed outside the output folder (written by anyone who can write the table): failed
        // for the fleet with the reason, never run.
        var refused: [(FleetLease, Ending)] = []
        var leases: [FleetLease] = []
        for lease in claimed {
            if let refusal = lease.refusal {
                logger.warning(
                    "refused a queued download",
                    metadata: ["haul.fleet.id": "\(lease.id)", "reason": "\(refusal)"]
                )
                refused.append((lease, .failed(reason: "refused: \(refusal)")))
            } else {
                leases.append(lease)
            }
        }
        let awaited = takeOverBytes(of: leases)
        for lease in leases { held.leases[lease.requestID] = lease }
        let now = ContinuousClock.now
        for lease in awaited { held.awaiting[lease.requestID] = Awaited(lease: lease, since: now) }
        refused += try start(leases.filter { held.awaiting[$0.requestID] == nil }, in: &held)
        if !refused.isEmpty { try await record(refused, requested: [:]) }
        if !awaited.isEmpty { try await startAwaited(&held) }
        return refused.count == claimed.count
    }

    /// Hands `leases` (held) to the manager in one `enqueue`: those it refuses (a destination that is
    /// a folder) leave `held`, to be failed for the fleet with the reason.
    func start(_ leases: [FleetLease], in held: inout Held) throws -> [(FleetLease, Ending)] {
        guard !leases.isEmpty else { return [] }
        let summary = try manager.enqueue(leases.map { prepare?($0.request) ?? $0.request })
        var refused: [(FleetLease, Ending)] = []
        for rejection in summary.rejected {
            if let lease = held.leases.removeValue(forKey: leases[rejection.index].requestID) {
                refused.append((lease, .failed(reason: "\(rejection.error)", category: rejection.error.category)))
            }
        }
        return refused
    }

    /// Runs `operation` again while the queue's database cannot be reached (restarted, cut off),
    /// after 0.2 s, then twice as long each time up to 5 s or a third of the lease; the transfers go
    /// on meanwhile. A refused statement, or the task's cancellation, ends it (the leases then expire
    /// for other workers).
    ///
    /// The bound matters after an outage longer than the leases: the server keeps the leases of
    /// before for a lease's length after it starts (`FleetSchema.requeueExpired`), and a worker
    /// that waited longer than that to try again would find its downloads requeued by the first
    /// worker back, which fetches them again (1 s leases and a 3.2 s wait did, one run in ten).
    @discardableResult
    private func persisting<T>(_ what: String, _ operation: () async throws -> T) async throws -> T {
        var delay: Duration?
        while true {
            do {
                return try await operation()
            } catch let error as FleetError {
                guard error.code == .connection, !Task.isCancelled else { throw error }
                reconnected.store(true, ordering: .relaxed)
                let wait = Self.retryDelay(after: delay, lease: queue.configuration.leaseDuration)
                delay = wait
                logger.warning(
                    "the queue's database cannot be reached: trying again",
                    metadata: [
                        "haul.operation": "\(what)", "haul.error": "\(error)",
                        "haul.retry.in": "\(wait)",
                    ]
                )
                try await Task.sleep(for: wait)
            }
        }
    }

    /// How long ``persisting(_:_:)`` waits after `previous` (`nil`: the first failure): 0.2 s, then
    /// twice as long each time, never more than 5 s nor a third of `lease`.
    static func retryDelay(after previous: Duration?, lease: Duration) -> Duration {
        let longest = min(.seconds(5), lease / 3)
        return min(previous.map { $0 * 2 } ?? .milliseconds(200), longest)
    }

    /// Records the outcomes of downloads that ended, in one statement; gives back the rows of those
    /// paused or cancelled here (settled as asked when another process asked).
    func record(_ batch: [(FleetLease, Ending)], requested: [DownloadID: FleetState]) async throws {
        var outcomes: [FleetOutcome] = []
        var released: [FleetLease] = []
        var settled: [FleetState: [FleetLease]] = [:]
        for (lease, ending) in batch {
            if case .completed(let file) = ending {
                var status = stat()
                let bytes = stat(file.path, &status) == 0 ? Int64(status.st_size) : 0
                outcomes.append(FleetOutcome(lease, .completed(bytes: bytes)))
                continue
            }
            if let state = requested[lease.requestID] {
                settled[state, default: []].append(lease)  // paused or cancelled as asked
                continue
            }
            switch ending {
            case .completed:
                break
            case .failed(let reason, let category):
                outcomes.append(FleetOutcome(lease, .failed(reason: reason), category: category))
            case .cancelled, .paused:
                released.append(lease)  // stopped here, or its manager shut down: any worker may take it
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
