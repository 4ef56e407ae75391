import FoundationEssentials
import Synchronization

/// Every download's events for the whole manager (``DownloadManager/events``): each download's hub
/// hands its events here too, in the order they were published, while anyone subscribes. Publishing
/// never blocks on a reader; with nobody subscribed it costs one atomic load.
final class EventFeed: Sendable {
    /// Events one subscriber may hold. Past it, a new progress event is dropped (a newer one
    /// follows), and for any other event the oldest progress event (else the oldest event) goes.
    static let subscriberBufferLimit = 4096

    /// Unsubscribes when the iterator that owns it goes away.
    final class Subscription: Sendable {
        let feed: EventFeed
        let id: Int

        init(feed: EventFeed) {
            self.feed = feed
            self.id = feed.subscribe()
        }

        deinit { feed.unsubscribe(id) }
    }

    private struct Subscriber {
        var buffer: [DownloadManagerEvent] = []
        /// Where the buffer's unread events start (read ones are dropped in bulk, not one by one).
        var head = 0
        var waiter: CheckedContinuation<DownloadManagerEvent?, Never>?
        /// The waiting task was cancelled: its `next()` returns `nil`.
        var cancelled = false
        var count: Int { buffer.count - head }
    }

    private struct State {
        var subscribers: [Int: Subscriber] = [:]
        var nextID = 0
        var closed = false
    }

    private let state = Mutex(State())
    private let subscribed = Atomic<Bool>(false)

    /// Whether anyone follows the feed (a hint for publishers; read without the lock).
    var hasSubscribers: Bool { subscribed.load(ordering: .relaxed) }

    func publish(_ event: DownloadManagerEvent) {
        guard hasSubscribers else { return }
        var toResume: [CheckedContinuation<DownloadManagerEvent?, Never>] = []
        state.withLock { state in
            guard !state.closed else { return }
            for id in state.subscribers.keys {
                if let waiter = state.subscribers[id]!.waiter {
                    state.subscribers[id]!.waiter = nil
                    toResume.append(waiter)
                } else {
                    Self.enqueue(event, into: &state.subscribers[id]!)
                }
            }
        }
        for waiter in toResume { waiter.resume(returning: event) }
    }

    private static func enqueue(_ event: DownloadManagerEvent, into subscriber: inout Subscriber) {
        if subscriber.count >= subscriberBufferLimit {
            if case .progress = event.event { return }
            let unread = subscriber.head..<subscriber.buffer.endIndex
            let index =
                unread.first { if case .progress = subscriber.buffer[$0].event { true } else { false } }
                ?? subscriber.head
            subscriber.buffer.remove(at: index)
        }
        if subscriber.head > 1024, subscriber.head * 2 > subscriber.buffer.count {
            subscriber.buffer.removeFirst(subscriber.head)
            subscriber.head = 0
        }
        subscriber.buffer.append(event)
    }

    /// Ends every subscription (the manager shut down).
    func close() {
        var toResume: [CheckedContinuation<DownloadManagerEvent?, Never>] = []
        state.withLock { state in
            state.closed = true
            for id in state.subscribers.keys {
                if let waiter = state.subscribers[id]!.waiter {
                    state.subscribers[id]!.waiter = nil
                    toResume.append(waiter)
                }
            }
        }
        for waiter in toResume { waiter.resume(returning: nil) }
    }

    func subscribe() -> Int {
        state.withLock { state in
            defer { state.nextID += 1 }
            state.subscribers[state.nextID] = Subscriber()
            subscribed.store(true, ordering: .relaxed)
            return state.nextID
        }
    }

    func unsubscribe(_ id: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<DownloadManagerEvent?, Never>? in
            let waiter = state.subscribers.removeValue(forKey: id)?.waiter
            subscribed.store(!state.subscribers.isEmpty, ordering: .relaxed)
            return waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The next event for subscriber `id`, or `nil` once the feed is closed and its events are read
    /// (or when the waiting task is cancelled).
    func next(_ id: Int) async -> DownloadManagerEvent? {
        await withTaskCancellationHandler {
            await waitForNext(id)
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<DownloadManagerEvent?, Never>? in
                state.subscribers[id]?.cancelled = true
                defer { state.subscribers[id]?.waiter = nil }
                return state.subscribers[id]?.waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    private func waitForNext(_ id: Int) async -> DownloadManagerEvent? {
        await withCheckedContinuation { (continuation: CheckedContinuation<DownloadManagerEvent?, Never>) in
            let value = state.withLock { state -> DownloadManagerEvent?? in
                guard var subscriber = state.subscribers[id], !subscriber.cancelled else { return .some(nil) }
                if subscriber.count > 0 {
                    let event = subscriber.buffer[subscriber.head]
                    subscriber.head += 1
                    if subscriber.head == subscriber.buffer.count {
                        subscriber.buffer.removeAll(keepingCapacity: true)
                        subscriber.head = 0
                    }
                    state.subscribers[id] = subscriber
                    return .some(event)
                }
                if state.closed { return .some(nil) }
                subscriber.waiter = continuation
                state.subscribers[id] = subscriber
                return nil
            }
            if let value { continuation.resume(returning: value) }
        }
    }
}
