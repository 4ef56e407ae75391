import FoundationEssentials
import Glibc
import Synchronization

/// Every download's events for the whole manager (``DownloadManager/events``): each download's hub
/// hands its events here too, in the order they were published, while anyone subscribes. Publishing
/// never blocks on a reader; with nobody subscribed it costs one atomic load.
///
/// A reader takes every event buffered for it at once (``nextBatch(_:)``), and a thread that
/// publishes many (the loop in each turn, `enqueue` in each run of rows) wakes a waiting reader
/// once for all of them (``deferringWakes(_:)``): a thread hop and a lock per batch, not per event.
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

    /// A waiting reader, resumed with a batch of events (none: the feed ended for it).
    typealias Waiter = CheckedContinuation<[DownloadManagerEvent], Never>

    private struct Subscriber {
        var buffer: [DownloadManagerEvent] = []
        /// Where the buffer's unread events start (read ones are dropped in bulk, not one by one).
        var head = 0
        var waiter: Waiter?
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
        /// Threads (`pthread_self`) whose wake-ups wait for ``wakeDeferred()``: the loop's for good,
        /// others inside ``deferringWakes(_:)``.
        var deferringThreads: Set<UInt> = []
    }

    private let state = Mutex(State())
    private let subscribed = Atomic<Bool>(false)
    /// Readers were left waiting beside buffered events by a deferring thread.
    private let wakesDeferred = Atomic<Bool>(false)

    /// Whether anyone follows the feed (a hint for publishers; read without the lock).
    var hasSubscribers: Bool { subscribed.load(ordering: .relaxed) }

    /// The calling thread (the loop's) defers its wake-ups to ``wakeDeferred()``, which it calls
    /// at the end of each turn.
    func attachCurrentThread() {
        let thread = UInt(pthread_self())
        state.withLock { _ = $0.deferringThreads.insert(thread) }
    }

    /// Runs `body`, in which this thread's events wake no reader, then wakes the waiting readers
    /// once for all of them (what `enqueue` publishes for a run of rows).
    func deferringWakes<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let thread = UInt(pthread_self())
        let inserted = state.withLock { $0.deferringThreads.insert(thread).inserted }
        guard inserted else { return try body() }  // already deferring (the loop, or nested)
        defer {
            state.withLock { _ = $0.deferringThreads.remove(thread) }
            wakeDeferred()
        }
        return try body()
    }

    /// Wakes each reader that waits while events are buffered for it (loop thread, end of turn).
    func wakeDeferred() {
        guard wakesDeferred.exchange(false, ordering: .relaxed) else { return }
        var toResume: [(Waiter, [DownloadManagerEvent])] = []
        state.withLock { state in
            state.subscribers.mutateEachValue { subscriber in
                guard let waiter = subscriber.waiter, subscriber.count > 0 else { return }
                toResume.append((waiter, Self.takeAll(from: &subscriber)))
                subscriber.waiter = nil
            }
        }
        for (waiter, events) in toResume { waiter.resume(returning: events) }
    }

    func publish(_ event: DownloadManagerEvent) {
        guard hasSubscribers else { return }
        var toResume: [(Waiter, [DownloadManagerEvent])] = []
        let thread = UInt(pthread_self())
        state.withLock { state in
            guard !state.closed else { return }
            let deferring = state.deferringThreads.contains(thread)
            state.subscribers.mutateEachValue { subscriber in
                Self.enqueue(event, into: &subscriber)
                guard let waiter = subscriber.waiter else { return }
                if deferring {
                    wakesDeferred.store(true, ordering: .relaxed)
                } else {
                    // With the events before it: the loop's of this turn may wait in the buffer still.
                    subscriber.waiter = nil
                    toResume.append((waiter, Self.takeAll(from: &subscriber)))
                }
            }
        }
        for (waiter, events) in toResume { waiter.resume(returning: events) }
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
        var toResume: [(Waiter, [DownloadManagerEvent])] = []
        state.withLock { state in
            state.closed = true
            state.subscribers.mutateEachValue { subscriber in
                if let waiter = subscriber.waiter {
                    subscriber.waiter = nil
                    toResume.append((waiter, Self.takeAll(from: &subscriber)))
                }
            }
        }
        for (waiter, events) in toResume { waiter.resume(returning: events) }
    }

    /// Every unread event of the subscriber, oldest first, taken from its buffer.
    private static func takeAll(from subscriber: inout Subscriber) -> [DownloadManagerEvent] {
        let events: [DownloadManagerEvent]
        if subscriber.head == 0 {
            events = subscriber.buffer
            subscriber.buffer = []
        } else {
            events = Array(subscriber.buffer[subscriber.head...])
            subscriber.buffer.removeAll(keepingCapacity: true)
        }
        subscriber.head = 0
        subscriber.finalCount = 0
        return events
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
        let waiter = state.withLock { state -> Waiter? in
            let waiter = state.subscribers.removeValue(forKey: id)?.waiter
            subscribed.store(!state.subscribers.isEmpty, ordering: .relaxed)
            return waiter
        }
        waiter?.resume(returning: [])
    }

    /// The events buffered for subscriber `id`, oldest first, waiting for one if there are none;
    /// none once the feed is closed (or the reading task cancelled) and the events published before
    /// are read: what was published is not lost.
    func nextBatch(_ id: Int) async -> [DownloadManagerEvent] {
        await withTaskCancellationHandler {
            await waitForBatch(id)
        } onCancel: {
            let woken = state.withLock { state -> (Waiter, [DownloadManagerEvent])? in
                guard state.subscribers[id] != nil else { return nil }
                state.subscribers[id]!.cancelled = true
                guard let waiter = state.subscribers[id]!.waiter else { return nil }
                state.subscribers[id]!.waiter = nil
                // A waiter beside buffered events: the loop's wake-up for them is still to come.
                return (waiter, Self.takeAll(from: &state.subscribers[id]!))
            }
            if let (waiter, events) = woken { waiter.resume(returning: events) }
        }
    }

    private func waitForBatch(_ id: Int) async -> [DownloadManagerEvent] {
        await withCheckedContinuation { (continuation: Waiter) in
            let value = state.withLock { state -> [DownloadManagerEvent]? in
                // In place: a copy of the subscriber would copy its buffer.
                guard state.subscribers[id] != nil else { return [] }
                if state.subscribers[id]!.count > 0 { return Self.takeAll(from: &state.subscribers[id]!) }
                if state.closed || state.subscribers[id]!.cancelled { return [] }
                state.subscribers[id]!.waiter = continuation
                return nil
            }
            if let value { continuation.resume(returning: value) }
        }
    }
}
