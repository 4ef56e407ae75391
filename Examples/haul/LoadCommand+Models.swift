import FoundationEssentials
import Haul
import Synchronization

/// How `haul load` runs its downloads: the closed model (a number at once) and the open model (a
/// number started per second), the plan they take their downloads from, and the report they feed.
extension LoadCommand {
    /// The closed model: `concurrency` downloads at once, the next started as one ends. One task
    /// follows the manager's feed of events and starts the next download when it reads an outcome:
    /// the outcomes of many downloads arrive in one batch, one wake-up, rather than each resuming a
    /// task of its own.
    static func closed(
        _ plan: Plan,
        concurrency: Int,
        with manager: DownloadManager,
        into recorder: Recorder,
        inFlight: InFlight
    ) async {
        // Subscribed before the first download starts: no outcome is missed. Outcomes only: the
        // loop makes no other event for the feed.
        var events = manager.outcomes.makeAsyncIterator()
        func startNext() {
            while inFlight.count < concurrency, let planned = plan.next() {
                recorder.started.add(1, ordering: .relaxed)
                do {
                    inFlight.add(try manager.download(planned.request))
                } catch {
                    record(refusal: error, of: planned, into: recorder)
                }
            }
        }
        startNext()
        while inFlight.count > 0, let event = await events.next() {
            guard event.event.isFinal, let download = inFlight.remove(event.id) else { continue }
            let outcome: LoadReport.Outcome
            switch event.event {
            case .completed: outcome = .completed
            case .failed(let error): outcome = Self.outcome(failing: error)
            default: outcome = .cancelled
            }
            recorder.record(download.timings, outcome: outcome)
            startNext()
        }
    }

    /// Records a download the manager refused to start.
    static func record(
        refusal error: any Error,
        of planned: Planned,
        scheduledAt: ContinuousClock.Instant? = nil,
        into recorder: Recorder
    ) {
        let refused =
            error as? DownloadError
            ?? DownloadError(
                code: .internalError,
                url: DownloadRequest.redacted(planned.target.url),
                detail: "\(error)"
            )
        recorder.record(DownloadTimings(), outcome: .failed(refused), scheduledAt: scheduledAt)
    }

    /// The open model: the downloads start on a schedule, `rate` per second (after rising to it over
    /// `ramp` seconds), whatever the others take; each is measured from when it was due.
    static func open(
        _ plan: Plan,
        on schedule: Schedule,
        from start: ContinuousClock.Instant,
        with manager: DownloadManager,
        into recorder: Recorder,
        inFlight: InFlight
    ) async {
        await withTaskGroup(of: Void.self) { group in
            var index = 0
            while true {
                // Counted on the schedule, not the clock: the run starts the downloads due within its
                // duration, however late the machine lets them start.
                let offset = Schedule.offset(of: index, rate: schedule.rate, ramp: schedule.ramp)
                if let duration = schedule.duration, offset >= duration { break }
                let due = start + .nanoseconds(Int64(offset * 1e9))
                // Late ones start at once, so that the count started stays the schedule's. A stop
                // (Ctrl-C) ends the wait: at a rate of one a minute it would otherwise come a minute late.
                if due > .now { await plan.wait(until: due) }
                guard let planned = plan.next() else { break }
                group.addTask {
                    await fetch(planned, scheduledAt: due, with: manager, into: recorder, inFlight: inFlight)
                }
                index += 1
            }
        }
    }

    /// A URL the run takes in turn, with the headers its input line gave and the name its file takes
    /// with -o.
    struct Target: Sendable {
        let url: URL
        let headers: [DownloadHeader]
        let name: String
    }

    /// One download of the run: its target, and its request (to a file in -o's folder, or discarded).
    struct Planned: Sendable {
        let target: Target
        let request: DownloadRequest
    }

    /// When the downloads of the open model are due: `rate` per second after a rise over `ramp`
    /// seconds, for `duration` seconds (or as many as -n says).
    struct Schedule {
        let rate: Double
        let ramp: Double
        let duration: Double?

        /// Seconds from the start at which download `index` (from 0) is due: `rate` per second, after
        /// a linear rise from 0 over `ramp` seconds (whose downloads are `rate × ramp / 2`).
        static func offset(of index: Int, rate: Double, ramp: Double) -> Double {
            let k = Double(index)
            let duringRamp = rate * ramp / 2
            if ramp > 0, k < duringRamp { return (2 * k * ramp / rate).squareRoot() }
            return ramp + (k - duringRamp) / rate
        }
    }

    /// Makes `planned`'s download (its body kept or thrown away) and records how it went.
    static func fetch(
        _ planned: Planned,
        scheduledAt: ContinuousClock.Instant? = nil,
        with manager: DownloadManager,
        into recorder: Recorder,
        inFlight: InFlight
    ) async {
        recorder.started.add(1, ordering: .relaxed)
        let download: Download
        do {
            download = try manager.download(planned.request)
        } catch {
            record(refusal: error, of: planned, scheduledAt: scheduledAt, into: recorder)
            return
        }
        inFlight.add(download)
        let outcome: LoadReport.Outcome
        do {
            _ = try await download.finished()
            outcome = .completed
        } catch {
            outcome = Self.outcome(failing: error)
        }
        inFlight.remove(download.id)
        recorder.record(download.timings, outcome: outcome, scheduledAt: scheduledAt)
    }

    /// How a download that did not complete ended: cancelled (by the run, or a `CancellationError`),
    /// or failed with its error.
    static func outcome(failing error: any Error) -> LoadReport.Outcome {
        guard let error = error as? DownloadError, error.code != .cancelled else { return .cancelled }
        return .failed(error)
    }

    /// The run's report, which every download's task adds to, and how many downloads began.
    final class Recorder: Sendable {
        let report = Mutex(LoadReport())
        let started = Atomic<Int>(0)
        /// Set when a signal stopped the run: what ends after it, but for a completed body, was
        /// stopped by the run and is not the server's doing.
        let stopped = Atomic<Bool>(false)
        /// Set when a timed run (-z) reached its end: the downloads still in flight were stopped,
        /// and are counted apart (``LoadReport/cancelled``).
        let ranOut = Atomic<Bool>(false)

        /// Records a download that ended (unless the run's stop ended it).
        func record(
            _ timings: DownloadTimings,
            outcome: LoadReport.Outcome,
            scheduledAt: ContinuousClock.Instant? = nil
        ) {
            if outcome != .completed, stopped.load(ordering: .relaxed) { return }
            report.withLock { $0.record(timings, outcome: outcome, scheduledAt: scheduledAt) }
        }
    }

    /// The downloads in flight, from their start to their end (both models keep them here; the
    /// closed one counts its concurrency by them), which the end of a timed run (-z) stops: one
    /// that starts after it is stopped at once.
    final class InFlight: Sendable {
        private let downloads = Mutex<(running: [DownloadID: Download], ended: Bool)>(([:], false))

        var count: Int { downloads.withLock { $0.running.count } }

        func add(_ download: Download) {
            let ended = downloads.withLock { state in
                state.running[download.id] = download
                return state.ended
            }
            if ended { download.cancel() }
        }

        /// The download that ended, if it was in flight.
        @discardableResult
        func remove(_ id: DownloadID) -> Download? {
            downloads.withLock { $0.running.removeValue(forKey: id) }
        }

        /// Cancels every download in flight, and each added later; each stays in flight until its
        /// end is read.
        func stopAll() {
            let running = downloads.withLock { state in
                state.ended = true
                return Array(state.running.values)
            }
            for download in running { download.cancel() }
        }
    }

    /// Which URL the next download takes, and whether the run goes on: the URLs in turn, `count`
    /// downloads in all or until `deadline`. Any task.
    final class Plan: Sendable {
        let targets: [Target]
        let folder: URL?
        let count: Int?
        let deadline: ContinuousClock.Instant?
        private let started = Atomic<Int>(0)
        private let stopped = Atomic<Bool>(false)

        init(targets: [Target], folder: URL?, count: Int?, deadline: ContinuousClock.Instant?) {
            (self.targets, self.folder, self.count, self.deadline) = (targets, folder, count, deadline)
        }

        /// The open model's wait for the next download's time, which ``stop()`` cuts short.
        private let waiting = Mutex<Task<Void, Never>?>(nil)

        /// Ends the run: ``next()`` gives no download after it, and a ``wait(until:)`` returns.
        func stop() {
            stopped.store(true, ordering: .relaxed)
            waiting.withLock { $0?.cancel() }
        }

        /// Returns at `due`, or at once when the run is stopped (before or during the wait).
        func wait(until due: ContinuousClock.Instant) async {
            let sleep = Task { _ = try? await Task.sleep(until: due, clock: .continuous) }
            waiting.withLock { $0 = sleep }
            // A stop between the store and here finds the task; one before it is seen here.
            if stopped.load(ordering: .relaxed) { sleep.cancel() }
            await sleep.value
            waiting.withLock { $0 = nil }
        }

        /// The next download, or `nil` once the run is over.
        func next() -> Planned? {
            if stopped.load(ordering: .relaxed) { return nil }
            if let deadline, ContinuousClock.now >= deadline { return nil }
            let index = started.add(1, ordering: .relaxed).oldValue
            if let count, index >= count { return nil }
            let target = targets[index % targets.count]
            guard let folder else {
                return Planned(target: target, request: .discarding(target.url, headers: target.headers))
            }
            let destination = folder.appendingPathComponent("\(index)-\(target.name)", isDirectory: false)
            return Planned(
                target: target,
                request: DownloadRequest(url: target.url, destination: destination, headers: target.headers)
            )
        }
    }
}
