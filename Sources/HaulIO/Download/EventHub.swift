import Dispatch
import FoundationEssentials
import HaulValues
import Synchronization

/// The meeting point of the loop thread, which publishes a download's events, and the tasks that read
/// them or wait for its end. Publishing never blocks on a reader.
package final class EventHub: Sendable {
    /// Events one subscriber may hold before the oldest are dropped (progress is coalesced first).
    static let subscriberBufferLimit = 16
    /// How long after its creation a download keeps its events for a first subscriber: long enough
    /// for the caller of `download(…)` to start iterating on a busy machine; after it, thousands of
    /// downloads nobody follows hold no list of old events (about 600 bytes each).
    static let earlyWindow: UInt64 = 2_000_000_000  // nanoseconds

    /// Unsubscribes when the iterator that owns it goes away.
    package final class Subscription: Sendable {
        package let hub: EventHub
        package let id: Int

        package init(hub: EventHub) {
            self.hub = hub
            self.id = hub.subscribe()
        }

        deinit { hub.unsubscribe(id) }
    }

    private struct State {
        var downloadState: DownloadState = .queued
        var progress: DownloadProgress
        /// The publish/subscribe core, with this hub's buffers (``RecentEvents``).
        var subscribers = Subscribers<RecentEvents>()
        /// The ids of result waiters (``result()``).
        var nextWaiterID = 0
        /// The events published before anyone subscribed, for the first subscriber (then `nil`), kept
        /// until `earlyUntil` (uptime nanoseconds).
        var early: RecentEvents? = RecentEvents()
        var earlyUntil: UInt64
        /// Set once: no event follows.
        var closed = false
        var result: Result<URL, DownloadError>?
        /// The result may be handed out: the turn that published it committed its rows (or it was
        /// published off the loop, or the manager shut down). Until then a waiter that comes late
        /// waits too: whoever hears the outcome finds it in the journal.
        var resultCommitted = false
        var resultWaiters: [Int: CheckedContinuation<URL, any Error>] = [:]
        var cancelledResultWaiters: Set<Int> = []
    }

    private let state: Mutex<State>
    /// `state.closed`, readable without the lock: set once, inside it, when the hub closes.
    private let closedFlag = Atomic<Bool>(false)
    /// The manager's feed, which carries this download's events too, with its id and destination.
    private let feed: (feed: EventFeed, id: DownloadID, destinationPath: String)?
    /// The handle that owns this hub, carried on the feed's events. Set once by ``Download/init``,
    /// before the hub is published to anyone; weak: the handle owns the hub.
    nonisolated(unsafe) weak var owner: LiveDownload?

    /// - Parameters:
    ///   - earlyWindow: how long events are kept for a first subscriber (tests shorten it).
    ///   - feed: the manager's feed, and what its events say of this download.
    init(
        progress: DownloadProgress,
        earlyWindow: UInt64 = EventHub.earlyWindow,
        feed: (feed: EventFeed, id: DownloadID, destinationPath: String)? = nil
    ) {
        state = Mutex(State(progress: progress, earlyUntil: DispatchTime.now().uptimeNanoseconds + earlyWindow))
        self.feed = feed
    }

    // MARK: publishing (loop thread)

    /// Publishes one event and the snapshot it implies.
    package func publish(_ event: DownloadEvent) {
        if event.isFinal { owner?.ledger.withLock { $0.ended() } }
        var wakes: [Subscribers<RecentEvents>.Wake] = []
        var resultWaiters: [CheckedContinuation<URL, any Error>] = []
        var result: Result<URL, DownloadError>?
        let deferring = feed?.feed.isOnLoopThread == true
        let published = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            Self.apply(event, to: &state)
            if state.early != nil {
                if DispatchTime.now().uptimeNanoseconds >= state.earlyUntil {
                    state.early = nil
                } else {
                    state.early!.keep(event)
                }
            }
            _ = state.subscribers.publish(event, deferringWakes: false, into: &wakes)
            if event.isFinal {
                state.closed = true
                closedFlag.store(true, ordering: .releasing)
                result = state.result
                if !deferring {
                    state.resultCommitted = true
                    resultWaiters = Array(state.resultWaiters.values)
                    state.resultWaiters = [:]
                }
            }
            return true
        }
        if published, let feed, feed.feed.hasSubscribers, event.isFinal || feed.feed.wantsEveryEvent {
            let owner = owner
            // A download into a folder shows the file it chose, once it chose one.
            feed.feed.publish(
                FeedEvent(
                    id: feed.id,
                    destinationPath: owner?.destinationPath ?? feed.destinationPath,
                    event: event,
                    download: owner
                )
            )
        }
        if deferring, let feed, result != nil {
            // The result's waiters, those that come before the turn's end included, after its commit.
            feed.feed.resumeAtTurnEnd { [self, wakes, result] in
                var late: [Subscribers<RecentEvents>.Wake] = []
                let waiters = self.state.withLock { state in
                    state.resultCommitted = true
                    state.subscribers.endAll(into: &late)  // readers that came meanwhile
                    defer { state.resultWaiters = [:] }
                    return Array(state.resultWaiters.values)
                }
                Self.resume(wakes + late, waiters, with: result)
            }
            return
        }
        let waiting = !wakes.isEmpty || (result != nil && !resultWaiters.isEmpty)
        guard waiting else { return }
        if let feed, deferring {
            feed.feed.resumeAtTurnEnd { [wakes, resultWaiters, result] in
                Self.resume(wakes, resultWaiters, with: result)
            }
        } else {
            Self.resume(wakes, resultWaiters, with: result)
        }
    }

    /// Resumes a publication's readers with their events and its result's waiters with it.
    private static func resume(
        _ wakes: [Subscribers<RecentEvents>.Wake],
        _ resultWaiters: [CheckedContinuation<URL, any Error>],
        with result: Result<URL, DownloadError>?
    ) {
        for (waiter, value) in wakes { waiter.resume(returning: value) }
        if let result {
            for waiter in resultWaiters { waiter.resume(with: result.mapError { $0 as any Error }) }
        }
    }

    /// Ends every subscription without a final event (the manager shut down); waiters for the
    /// result get `error`.
    package func close(with error: DownloadError) {
        var wakes: [Subscribers<RecentEvents>.Wake] = []
        var resultWaiters: [CheckedContinuation<URL, any Error>] = []
        state.withLock { state in
            guard !state.closed else { return }
            state.closed = true
            closedFlag.store(true, ordering: .releasing)
            state.result = .failure(error)
            state.resultCommitted = true
            state.subscribers.endAll(into: &wakes)
            resultWaiters = Array(state.resultWaiters.values)
            state.resultWaiters = [:]
        }
        for (waiter, value) in wakes { waiter.resume(returning: value) }
        for waiter in resultWaiters { waiter.resume(throwing: error) }
    }

    private static func apply(_ event: DownloadEvent, to state: inout State) {
        state.downloadState = state.downloadState.after(event)
        switch event {
        case .connecting(let progress), .receiving(let progress), .progress(let progress), .paused(let progress):
            state.progress = progress
        case .restarted: state.progress.bytesReceived = 0
        case .waitingToRetry: state.progress.bytesPerSecond = 0; state.progress.estimatedTimeRemaining = nil
        case .completed(let url): state.result = .success(url)
        case .failed(let error): state.result = .failure(error)
        case .cancelled: state.result = .failure(DownloadError(code: .cancelled, url: nil))
        case .queued, .warning, .switchedURL: break
        }
    }

    // MARK: reading (any task)

    /// The current state and progress.
    var snapshot: (state: DownloadState, progress: DownloadProgress) {
        state.withLock { ($0.downloadState, $0.progress) }
    }

    /// Whether the download ended (a final event) or its manager shut down.
    /// No lock: a hub closes once and stays closed.
    package var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

    /// How many events subscriber `id` holds (for tests of bounded memory).
    func bufferedCount(_ id: Int) -> Int {
        state.withLock { $0.subscribers.bufferedCount(id) }
    }

    func subscribe() -> Int {
        state.withLock { state in
            let replay = state.downloadState.event(progress: state.progress)
            let first = state.early.flatMap { $0.isEmpty ? nil : $0 } ?? RecentEvents([replay])
            state.early = nil
            return state.subscribers.add(first)
        }
    }

    func unsubscribe(_ id: Int) {
        let waiter = state.withLock { $0.subscribers.remove(id) }
        waiter?.resume(returning: RecentEvents.end)
    }

    package func next(_ id: Int) async -> DownloadEvent? {
        await Subscribers<RecentEvents>.wait(
            read: { waiter in
                state.withLock { state in
                    // The final event's turn has not committed its rows yet: its reader, one that
                    // came late included, hears of it once they are (``publish(_:)``).
                    if state.closed, !state.resultCommitted { return state.subscribers.waitForEnd(id, waiter: waiter) }
                    return state.subscribers.read(id, ended: state.closed, waiter: waiter)
                }
            },
            onCancel: { state.withLock { $0.subscribers.cancel(id) } }
        )
    }

    /// Waits for the final result.
    func result() async throws -> URL {
        let id = state.withLock { state in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<URL, any Error>) in
                let ready: Result<URL, any Error>? = state.withLock { state in
                    if let result = state.result, state.closed, state.resultCommitted {
                        return result.mapError { $0 as any Error }
                    }
                    if state.cancelledResultWaiters.remove(id) != nil { return .failure(CancellationError()) }
                    state.resultWaiters[id] = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<URL, any Error>? in
                if let waiter = state.resultWaiters.removeValue(forKey: id) { return waiter }
                state.cancelledResultWaiters.insert(id)
                return nil
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
