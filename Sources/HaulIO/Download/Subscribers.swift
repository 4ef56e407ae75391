/// What a subscriber's buffer is to the publish/subscribe core (``Subscribers``): how events wait
/// while their reader is behind, which are dropped past a limit, and what one read takes.
protocol SubscriberBuffer {
    associatedtype Event
    /// What one read returns: one event, or every buffered one.
    associatedtype Delivery: Sendable
    init()
    var isEmpty: Bool { get }
    /// The events it holds, for tests.
    var count: Int { get }
    /// Keeps `event` for a later read, dropping older ones past the buffer's limit as its kind says.
    /// Whether this subscriber takes `event` at all (one that follows outcomes only does not take
    /// the rest).
    func accepts(_ event: Event) -> Bool
    mutating func keep(_ event: Event)
    /// What the next read returns; the buffer is not empty.
    mutating func take() -> Delivery
    /// What a read returns for `event` when nothing is buffered and a reader waits.
    static func delivery(of event: Event) -> Delivery
    /// What a read returns once the stream ended for it.
    static var end: Delivery { get }
    /// Whether a reader whose task was cancelled still gets what was buffered for it before the end
    /// (the manager's feed: what was published is not lost), or the end at once (a download's).
    static var readsBufferAfterCancel: Bool { get }
}

/// The publish/subscribe core of a download's ``EventHub`` and the manager's ``EventFeed``: the
/// subscribers by id, each with its buffer (``SubscriberBuffer``: one event a read for a
/// download's, batches for the feed), at most one waiting reader each, and cancellation. A value
/// kept under its owner's lock; the readers it hands back are resumed by the owner after the lock.
struct Subscribers<Buffer: SubscriberBuffer> {
    typealias Waiter = CheckedContinuation<Buffer.Delivery, Never>
    /// A reader to resume, with what it reads.
    typealias Wake = (waiter: Waiter, delivery: Buffer.Delivery)

    private struct Subscriber {
        var buffer: Buffer
        var waiter: Waiter?
        /// Its reading task was cancelled.
        var cancelled = false
    }

    private var subscribers: [Int: Subscriber] = [:]
    private var nextID = 0

    var isEmpty: Bool { subscribers.isEmpty }

    /// A new subscriber, whose first reads return `buffer`'s events; its id.
    mutating func add(_ buffer: Buffer = Buffer()) -> Int {
        defer { nextID += 1 }
        subscribers[nextID] = Subscriber(buffer: buffer)
        return nextID
    }

    /// Removes subscriber `id`; its waiting reader, if any, is to be resumed with the end.
    mutating func remove(_ id: Int) -> Waiter? {
        subscribers.removeValue(forKey: id)?.waiter
    }

    /// Gives `event` to every subscriber: to a waiting reader at once (with the events buffered
    /// before it), else to its buffer; `deferringWakes`: to buffers only, the readers left waiting
    /// (``wakeWaiting(into:)`` wakes them). Returns whether a reader was left waiting beside events.
    mutating func publish(_ event: Buffer.Event, deferringWakes: Bool, into wakes: inout [Wake]) -> Bool {
        var leftWaiting = false
        subscribers.mutateEachValue { subscriber in
            guard subscriber.buffer.accepts(event) else { return }
            guard let waiter = subscriber.waiter else {
                subscriber.buffer.keep(event)
                return
            }
            if deferringWakes {
                subscriber.buffer.keep(event)
                leftWaiting = true
            } else if subscriber.buffer.isEmpty {
                subscriber.waiter = nil
                wakes.append((waiter, Buffer.delivery(of: event)))
            } else {
                subscriber.buffer.keep(event)
                subscriber.waiter = nil
                wakes.append((waiter, subscriber.buffer.take()))
            }
        }
        return leftWaiting
    }

    /// Every reader that waits while events are buffered for it, with them.
    mutating func wakeWaiting(into wakes: inout [Wake]) {
        subscribers.mutateEachValue { subscriber in
            guard let waiter = subscriber.waiter, !subscriber.buffer.isEmpty else { return }
            subscriber.waiter = nil
            wakes.append((waiter, subscriber.buffer.take()))
        }
    }

    /// The stream ended for everyone: each waiting reader, with what is buffered for it, else the end.
    mutating func endAll(into wakes: inout [Wake]) {
        subscribers.mutateEachValue { subscriber in
            guard let waiter = subscriber.waiter else { return }
            subscriber.waiter = nil
            wakes.append((waiter, subscriber.buffer.isEmpty ? Buffer.end : subscriber.buffer.take()))
        }
    }

    /// A read by subscriber `id`: what it returns now, or nil when `waiter` was left to wait for the
    /// next event (`ended`: no event follows).
    mutating func read(_ id: Int, ended: Bool, waiter: Waiter) -> Buffer.Delivery? {
        // In place: a copy of the subscriber would copy its buffer.
        guard subscribers[id] != nil else { return Buffer.end }
        if subscribers[id]!.cancelled, !Buffer.readsBufferAfterCancel { return Buffer.end }
        if !subscribers[id]!.buffer.isEmpty { return subscribers[id]!.buffer.take() }
        if ended || subscribers[id]!.cancelled { return Buffer.end }
        subscribers[id]!.waiter = waiter
        return nil
    }

    /// Leaves subscriber `id`'s reader waiting whatever it holds (resumed by ``endAll(into:)``, or by
    /// its cancellation): ``Buffer/end`` at once when it is gone.
    mutating func waitForEnd(_ id: Int, waiter: Waiter) -> Buffer.Delivery? {
        guard subscribers[id] != nil else { return Buffer.end }
        subscribers[id]!.waiter = waiter
        return nil
    }

    /// Subscriber `id`'s reading task was cancelled: its waiting reader, if any, to resume now.
    mutating func cancel(_ id: Int) -> Wake? {
        guard subscribers[id] != nil else { return nil }
        subscribers[id]!.cancelled = true
        guard let waiter = subscribers[id]!.waiter else { return nil }
        subscribers[id]!.waiter = nil
        let buffered = Buffer.readsBufferAfterCancel && !subscribers[id]!.buffer.isEmpty
        return (waiter, buffered ? subscribers[id]!.buffer.take() : Buffer.end)
    }

    /// The events buffered for subscriber `id` (tests).
    func bufferedCount(_ id: Int) -> Int { subscribers[id]?.buffer.count ?? 0 }

    /// Whether the buffer of any subscriber satisfies `predicate` (on subscribing and leaving only).
    func anyBuffer(_ predicate: (Buffer) -> Bool) -> Bool { subscribers.values.contains { predicate($0.buffer) } }

    /// Whether subscriber `id` has a reader waiting (tests).
    func isWaiting(_ id: Int) -> Bool { subscribers[id]?.waiter != nil }
}

extension Subscribers {
    /// One read by a waiting task: `read` (under the owner's lock: ``read(_:ended:waiter:)``) returns
    /// what is there or leaves the continuation to wait; `cancel` (under the lock: ``cancel(_:)``)
    /// runs when the task is cancelled, and the reader it returns is resumed.
    static func wait(
        read: (Waiter) -> Buffer.Delivery?,
        onCancel cancel: @Sendable () -> Wake?
    ) async -> Buffer.Delivery {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                if let ready = read(continuation) { continuation.resume(returning: ready) }
            }
        } onCancel: {
            if let (waiter, delivery) = cancel() { waiter.resume(returning: delivery) }
        }
    }
}
