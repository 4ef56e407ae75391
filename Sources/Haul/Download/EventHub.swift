import Dispatch
import FoundationEssentials
import Synchronization

/// The meeting point of the loop thread, which publishes a download's events, and the tasks that read
/// them or wait for its end. Publishing never blocks on a reader.
final class EventHub: Sendable {
    /// Events one subscriber may hold before the oldest are dropped (progress is coalesced first).
    static let subscriberBufferLimit = 16
    /// How long after its creation a download keeps its events for a first subscriber: long enough
    /// for the caller of `download(…)` to start iterating on a busy machine; after it, thousands of
    /// downloads nobody follows hold no list of old events (about 600 bytes each).
    static let earlyWindow: UInt64 = 2_000_000_000  // nanoseconds

    /// Unsubscribes when the iterator that owns it goes away.
    final class Subscription: Sendable {
        let hub: EventHub
        let id: Int

        init(hub: EventHub) {
            self.hub = hub
            self.id = hub.subscribe()
        }

        deinit { hub.unsubscribe(id) }
    }

    private struct Subscriber {
        var buffer: [DownloadEvent] = []
        var waiter: CheckedContinuation<DownloadEvent?, Never>?
        var cancelled = false
    }

    private struct State {
        var downloadState: DownloadState = .queued
        var progress: DownloadProgress
        var subscribers: [Int: Subscriber] = [:]
        var nextID = 0
        /// The events published before anyone subscribed, for the first subscriber (then `nil`), kept
        /// until `earlyUntil` (uptime nanoseconds).
        var early: [DownloadEvent]? = []
        var earlyUntil: UInt64
        /// Set once: no event follows.
        var closed = false
        var result: Result<URL, DownloadError>?
        var resultWaiters: [Int: CheckedContinuation<URL, any Error>] = [:]
        var cancelledResultWaiters: Set<Int> = []
    }

    private let state: Mutex<State>
    /// The manager's feed, which carries this download's events too, with its id and destination.
    private let feed: (feed: EventFeed, id: DownloadID, destinationPath: String)?
    /// The handle that owns this hub, carried on the feed's events. Set once by ``Download/init``,
    /// before the hub is published to anyone; weak: the handle owns the hub.
    nonisolated(unsafe) weak var owner: Download?

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
    func publish(_ event: DownloadEvent) {
        var toResume: [(CheckedContinuation<DownloadEvent?, Never>, DownloadEvent?)] = []
        var resultWaiters: [CheckedContinuation<URL, any Error>] = []
        var result: Result<URL, DownloadError>?
        let published = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            Self.apply(event, to: &state)
            if state.early != nil {
                if DispatchTime.now().uptimeNanoseconds >= state.earlyUntil {
                    state.early = nil
                } else {
                    Self.enqueue(event, into: &state.early!)
                }
            }
            state.subscribers.mutateEachValue { subscriber in
                if let waiter = subscriber.waiter {
                    subscriber.waiter = nil
                    toResume.append((waiter, event))
                } else {
                    Self.enqueue(event, into: &subscriber.buffer)
                }
            }
            if event.isFinal {
                state.closed = true
                resultWaiters = Array(state.resultWaiters.values)
                state.resultWaiters = [:]
                result = state.result
            }
            return true
        }
        if published, let feed, feed.feed.hasSubscribers {
            let owner = owner
            // A download into a folder shows the file it chose, once it chose one.
            feed.feed.publish(
                DownloadManagerEvent(
                    id: feed.id,
                    destinationPath: owner?.destinationPath ?? feed.destinationPath,
                    event: event,
                    download: owner
                )
            )
        }
        for (waiter, value) in toResume { waiter.resume(returning: value) }
        if let result {
            for waiter in resultWaiters { waiter.resume(with: result.mapError { $0 as any Error }) }
        }
    }

    /// Ends every subscription without a final event (the manager shut down); waiters for the
    /// result get `error`.
    func close(with error: DownloadError) {
        var toResume: [CheckedContinuation<DownloadEvent?, Never>] = []
        var resultWaiters: [CheckedContinuation<URL, any Error>] = []
        state.withLock { state in
            guard !state.closed else { return }
            state.closed = true
            state.result = .failure(error)
            state.subscribers.mutateEachValue { subscriber in
                if let waiter = subscriber.waiter {
                    subscriber.waiter = nil
                    toResume.append(waiter)
                }
            }
            resultWaiters = Array(state.resultWaiters.values)
            state.resultWaiters = [:]
        }
        for waiter in toResume { waiter.resume(returning: nil) }
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

    /// Appends with coalescing: a progress replaces a progress at the tail; past the limit the
    /// oldest event goes (the final event is always last, so it is never the one dropped).
    private static func enqueue(_ event: DownloadEvent, into buffer: inout [DownloadEvent]) {
        if case .progress = event, let last = buffer.last, case .progress = last {
            buffer[buffer.count - 1] = event
            return
        }
        // A download's usual events (connecting, receiving, progress, completed) in one allocation:
        // grown one by one, a buffer took three (30,000 in 10,000 small downloads).
        if buffer.capacity == 0 { buffer.reserveCapacity(4) }
        buffer.append(event)
        if buffer.count > subscriberBufferLimit {
            // Drop a progress first if there is one, else the oldest event.
            if let index = buffer.firstIndex(where: { if case .progress = $0 { true } else { false } }) {
                buffer.remove(at: index)
            } else {
                buffer.removeFirst()
            }
        }
    }

    // MARK: reading (any task)

    /// The current state and progress.
    var snapshot: (state: DownloadState, progress: DownloadProgress) {
        state.withLock { ($0.downloadState, $0.progress) }
    }

    /// Whether the download ended (a final event) or its manager shut down.
    var isClosed: Bool { state.withLock { $0.closed } }

    /// How many events subscriber `id` holds (for tests of bounded memory).
    func bufferedCount(_ id: Int) -> Int {
        state.withLock { $0.subscribers[id]?.buffer.count ?? 0 }
    }

    func subscribe() -> Int {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            let replay = state.downloadState.event(progress: state.progress)
            if let early = state.early, !early.isEmpty {
                state.subscribers[id] = Subscriber(buffer: early)
            } else {
                state.subscribers[id] = Subscriber(buffer: [replay])
            }
            state.early = nil
            return id
        }
    }

    func unsubscribe(_ id: Int) {
        let waiter = state.withLock { $0.subscribers.removeValue(forKey: id)?.waiter }
        waiter?.resume(returning: nil)
    }

    func next(_ id: Int) async -> DownloadEvent? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<DownloadEvent?, Never>) in
                let immediate: DownloadEvent?? = state.withLock { state in
                    // In place: a copy of the subscriber would copy its buffer.
                    guard state.subscribers[id]?.cancelled == false else { return .some(nil) }
                    if !state.subscribers[id]!.buffer.isEmpty {
                        return .some(state.subscribers[id]!.buffer.removeFirst())
                    }
                    if state.closed { return .some(nil) }
                    state.subscribers[id]!.waiter = continuation
                    return .none
                }
                if case .some(let event) = immediate { continuation.resume(returning: event) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<DownloadEvent?, Never>? in
                state.subscribers[id]?.cancelled = true
                defer { state.subscribers[id]?.waiter = nil }
                return state.subscribers[id]?.waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Waits for the final result.
    func result() async throws -> URL {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<URL, any Error>) in
                let ready: Result<URL, any Error>? = state.withLock { state in
                    if let result = state.result, state.closed { return result.mapError { $0 as any Error } }
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
