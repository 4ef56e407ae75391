import FoundationEssentials
import Glibc
import Synchronization

/// Every download's events for the whole manager (``DownloadManager/events``): each download's hub
/// hands its events here too, in the order they were published, while anyone subscribes. Publishing
/// never blocks on a reader; with nobody subscribed it costs one atomic load.
///
/// A reader takes every event buffered for it at once (``nextBatch(_:)``), and the loop, which
/// publishes many in each turn (a run of enqueued rows' too), wakes a waiting reader once for all of
/// them at the turn's end (``wakeDeferred()``): a thread hop and a lock per batch, not per event.
package final class EventFeed: Sendable {
    /// Events one subscriber may hold besides final ones. Past it, a new progress event is dropped (a
    /// newer one follows), and for any other event the oldest progress event (else the oldest event
    /// that is not final) goes. Final events are never dropped.
    static let subscriberBufferLimit = 4096

    /// Unsubscribes when the iterator that owns it goes away.
    package final class Subscription: Sendable {
        package let feed: EventFeed
        package let id: Int

        package init(feed: EventFeed, outcomesOnly: Bool = false) {
            self.feed = feed
            self.id = feed.subscribe(outcomesOnly: outcomesOnly)
        }

        deinit { feed.unsubscribe(id) }
    }

    private struct State {
        /// The publish/subscribe core, with this feed's buffers (``EventBacklog``).
        var subscribers = Subscribers<EventBacklog>()
        var closed = false
    }

    private let state = Mutex(State())
    /// The loop's thread (`pthread_self`), once ``attachCurrentThread()`` ran on it; 0 before.
    private let loopThread = Atomic<UInt>(0)
    /// What the loop's downloads resume at the end of the turn (``resumeAtTurnEnd(_:)``): the
    /// loop's alone, no lock.
    private nonisolated(unsafe) var turnResumes: [@Sendable () -> Void] = []
    private let subscribed = Atomic<Bool>(false)
    /// Readers were left waiting beside buffered events by a deferring thread.
    private let wakesDeferred = Atomic<Bool>(false)

    package init() {}

    /// Whether anyone follows the feed (a hint for publishers; read without the lock).
    package var hasSubscribers: Bool { subscribed.load(ordering: .relaxed) }
    /// Whether a subscriber takes more than outcomes: otherwise a download's other events are not
    /// even made for the feed (a hint, read without the lock).
    package var wantsEveryEvent: Bool { everyEvent.load(ordering: .relaxed) }
    private let everyEvent = Atomic<Bool>(false)

    /// The calling thread (the loop's) defers its wake-ups to ``wakeDeferred()``, which it calls
    /// at the end of each turn.
    package func attachCurrentThread() {
        loopThread.store(UInt(pthread_self()), ordering: .relaxed)
    }

    /// Whether a loop's thread is attached (``attachCurrentThread()``).
    package var hasLoopThread: Bool { loopThread.load(ordering: .relaxed) != 0 }

    /// Whether the caller runs on the loop's thread (attached, see ``attachCurrentThread()``).
    package var isOnLoopThread: Bool {
        let loop = loopThread.load(ordering: .relaxed)
        return loop != 0 && loop == UInt(pthread_self())
    }

    /// Keeps `resume` (a download's waiters resumed with its events or its result) for
    /// ``resumeTurnWaiters()``, which the loop calls at the end of its turn: after the turn's rows
    /// are committed, and with the turn's other resumptions. Resumed one by one inside the turn,
    /// each woke a worker thread that took the core from the loop in the middle of its sockets
    /// (`Benchmarks/CHOICES.md`). Loop thread only.
    package func resumeAtTurnEnd(_ resume: @escaping @Sendable () -> Void) {
        assert(isOnLoopThread, "a turn's resumptions are the loop's")
        turnResumes.append(resume)
    }

    /// Runs what the turn's downloads left to resume (``resumeAtTurnEnd(_:)``). Loop thread, end of
    /// each turn.
    package func resumeTurnWaiters() {
        guard !turnResumes.isEmpty else { return }
        let resumes = turnResumes
        turnResumes.removeAll(keepingCapacity: true)
        for resume in resumes { resume() }
    }

    /// Wakes each reader that waits while events are buffered for it (loop thread, end of turn).
    package func wakeDeferred() {
        guard wakesDeferred.exchange(false, ordering: .relaxed) else { return }
        var wakes: [Subscribers<EventBacklog>.Wake] = []
        state.withLock { $0.subscribers.wakeWaiting(into: &wakes) }
        for (waiter, events) in wakes { waiter.resume(returning: events) }
    }

    package func publish(_ event: FeedEvent) {
        guard hasSubscribers else { return }
        var wakes: [Subscribers<EventBacklog>.Wake] = []
        let deferring = isOnLoopThread
        state.withLock { state in
            guard !state.closed else { return }
            // A reader woken gets the events before it too: the loop's of this turn may wait still.
            if state.subscribers.publish(event, deferringWakes: deferring, into: &wakes) {
                wakesDeferred.store(true, ordering: .relaxed)
            }
        }
        for (waiter, events) in wakes { waiter.resume(returning: events) }
    }

    /// Ends every subscription (the manager shut down): each reader gets the events buffered for it,
    /// then `nil`.
    package func close() {
        var wakes: [Subscribers<EventBacklog>.Wake] = []
        state.withLock { state in
            state.closed = true
            state.subscribers.endAll(into: &wakes)
        }
        for (waiter, events) in wakes { waiter.resume(returning: events) }
    }

    /// Whether subscriber `id` waits for an event (tests).
    func isWaiting(_ id: Int) -> Bool {
        state.withLock { $0.subscribers.isWaiting(id) }
    }

    func subscribe(outcomesOnly: Bool = false) -> Int {
        state.withLock { state in
            subscribed.store(true, ordering: .relaxed)
            if !outcomesOnly { everyEvent.store(true, ordering: .relaxed) }
            return state.subscribers.add(EventBacklog(outcomesOnly: outcomesOnly))
        }
    }

    func unsubscribe(_ id: Int) {
        let waiter = state.withLock { state in
            let waiter = state.subscribers.remove(id)
            subscribed.store(!state.subscribers.isEmpty, ordering: .relaxed)
            everyEvent.store(state.subscribers.anyBuffer { !$0.outcomesOnly }, ordering: .relaxed)
            return waiter
        }
        waiter?.resume(returning: [])
    }

    /// The events buffered for subscriber `id`, oldest first, waiting for one if there are none;
    /// none once the feed is closed (or the reading task cancelled) and the events published before
    /// are read: what was published is not lost.
    package func nextBatch(_ id: Int) async -> [FeedEvent] {
        await Subscribers<EventBacklog>.wait(
            read: { waiter in state.withLock { $0.subscribers.read(id, ended: $0.closed, waiter: waiter) } },
            onCancel: { state.withLock { $0.subscribers.cancel(id) } }
        )
    }
}
