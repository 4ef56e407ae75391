import FoundationEssentials
import Glibc
import Synchronization

/// Every download's events for the whole manager (``DownloadManager/events``): each download's hub
/// hands its events here too, in the order they were published, while anyone subscribes. Publishing
/// never blocks on a reader; with nobody subscribed it costs one atomic load.
final class EventFeed: Sendable {
    /// Events one subscriber may hold besides final ones. Past it, a new progress event is dropped (a
    /// newer one follows), and for any other event the oldest progress event (else the oldest event
    /// that is not final) goes. Final events are never dropped.
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
        /// Unread final events (completed, failed, cancelled): never dropped, so a subscriber that
        /// falls behind still learns every outcome; they do not count against the limit.
        var finalCount = 0
        var count: Int { buffer.count - head }
    }

    private struct State {
        var subscribers: [Int: Subscriber] = [:]
        var nextID = 0
        var closed = false
    }

    private let state = Mutex(State())
    private let subscribed = Atomic<Bool>(false)
    /// The loop thread (`pthread_self`), whose events wake a waiting reader once per loop turn
    /// (``wakeDeferred()``) rather than once per event: one thread hop for a turn's outcomes.
    private let deferringThread = Atomic<UInt>(0)
    /// Readers were left waiting beside buffered events by the loop thread.
    private let wakesDeferred = Atomic<Bool>(false)

    /// Whether anyone follows the feed (a hint for publishers; read without the lock).
    var hasSubscribers: Bool { subscribed.load(ordering: .relaxed) }

    /// The calling thread (the loop's) defers its wake-ups to ``wakeDeferred()``, which it calls
    /// at the end of each turn.
    func attachCurrentThread() {
        deferringThread.store(UInt(pthread_self()), ordering: .relaxed)
    }

    /// Wakes each reader that waits while events are buffered for it (loop thread, end of turn).
    func wakeDeferred() {
        guard wakesDeferred.exchange(false, ordering: .relaxed) else { return }
        var toResume: [(CheckedContinuation<DownloadManagerEvent?, Never>, DownloadManagerEvent)] = []
        state.withLock { state in
            state.subscribers.mutateEachValue { subscriber in
                guard let waiter = subscriber.waiter, let event = Self.take(from: &subscriber) else { return }
                toResume.append((waiter, event))
                subscriber.waiter = nil
            }
        }
        for (waiter, event) in toResume { waiter.resume(returning: event) }
    }

    func publish(_ event: DownloadManagerEvent) {
        guard hasSubscribers else { return }
        var toResume: [(CheckedContinuation<DownloadManagerEvent?, Never>, DownloadManagerEvent)] = []
        let deferring = deferringThread.load(ordering: .relaxed) == UInt(pthread_self())
        state.withLock { state in
            guard !state.closed else { return }
            state.subscribers.mutateEachValue { subscriber in
                Self.enqueue(event, into: &subscriber)
                guard let waiter = subscriber.waiter else { return }
                if deferring {
                    wakesDeferred.store(true, ordering: .relaxed)
                } else if let oldest = Self.take(from: &subscriber) {
                    // The oldest first: the loop's events of this turn may wait in the buffer still.
                    subscriber.waiter = nil
                    toResume.append((waiter, oldest))
                }
            }
        }
        for (waiter, event) in toResume { waiter.resume(returning: event) }
    }

    private static func enqueue(_ event: DownloadManagerEvent, into subscriber: inout Subscriber) {
        // An outcome takes no room from the others: it is only added.
        if !event.event.isFinal, subscriber.count - subscriber.finalCount >= subscriberBufferLimit {
            if case .progress = event.event { return }
            let unread = subscriber.head..<subscriber.buffer.endIndex
            let index =
                unread.first { if case .progress = subscriber.buffer[$0].event { true } else { false } }
                ?? unread.first { !subscriber.buffer[$0].event.isFinal }
            if let index { subscriber.buffer.remove(at: index) }
        }
        if event.event.isFinal { subscriber.finalCount += 1 }
        if subscriber.head > 1024, subscriber.head * 2 > subscriber.buffer.count {
            subscriber.buffer.removeFirst(subscriber.head)
            subscriber.head = 0
        }
        subscriber.buffer.append(event)
    }

    /// Ends every subscription (the manager shut down): each reader gets the events buffered for it,
    /// then `nil`.
    func close() {
        var toResume: [(CheckedContinuation<DownloadManagerEvent?, Never>, DownloadManagerEvent?)] = []
        state.withLock { state in
            state.closed = true
            state.subscribers.mutateEachValue { subscriber in
                if let waiter = subscriber.waiter {
                    subscriber.waiter = nil
                    toResume.append((waiter, Self.take(from: &subscriber)))
                }
            }
        }
        for (waiter, event) in toResume { waiter.resume(returning: event) }
    }

    /// The subscriber's oldest unread event, taken from its buffer.
    private static func take(from subscriber: inout Subscriber) -> DownloadManagerEvent? {
        guard subscriber.count > 0 else { return nil }
        let event = subscriber.buffer[subscriber.head]
        subscriber.head += 1
        if event.event.isFinal { subscriber.finalCount -= 1 }
        if subscriber.head == subscriber.buffer.count {
            subscriber.buffer.removeAll(keepingCapacity: true)
            subscriber.head = 0
        }
        return event
    }

    /// Whether subscriber `id` waits for an event (tests).
    func isWaiting(_ id: Int) -> Bool {
        state.withLock { $0.subscribers[id]?.waiter != nil }
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

    /// The next event for subscriber `id`, or `nil` once the feed is closed (or the reading task
    /// cancelled) and the events published before are read: what was published is not lost.
    func next(_ id: Int) async -> DownloadManagerEvent? {
        await withTaskCancellationHandler {
            await waitForNext(id)
        } onCancel: {
            typealias Woken = (CheckedContinuation<DownloadManagerEvent?, Never>, DownloadManagerEvent?)
            let woken = state.withLock { state -> Woken? in
                guard state.subscribers[id] != nil else { return nil }
                state.subscribers[id]!.cancelled = true
                guard let waiter = state.subscribers[id]!.waiter else { return nil }
                state.subscribers[id]!.waiter = nil
                // A waiter beside buffered events: the loop's wake-up for them is still to come.
                return (waiter, Self.take(from: &state.subscribers[id]!))
            }
            if let (waiter, event) = woken { waiter.resume(returning: event) }
        }
    }

    private func waitForNext(_ id: Int) async -> DownloadManagerEvent? {
        await withCheckedContinuation { (continuation: CheckedContinuation<DownloadManagerEvent?, Never>) in
            let value = state.withLock { state -> DownloadManagerEvent?? in
                // In place: a copy of the subscriber would copy its buffer.
                guard state.subscribers[id] != nil else { return .some(nil) }
                if let event = Self.take(from: &state.subscribers[id]!) { return .some(event) }
                if state.closed || state.subscribers[id]!.cancelled { return .some(nil) }
                state.subscribers[id]!.waiter = continuation
                return nil
            }
            if let value { continuation.resume(returning: value) }
        }
    }
}
