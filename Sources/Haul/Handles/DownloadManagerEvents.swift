import HaulIO

/// Every download's events for the whole manager, as an `AsyncSequence`: downloads queued with
/// ``DownloadManager/enqueue(_:)`` included (their `.queued`, then what happens once admitted),
/// without a handle for each.
///
/// Each iteration is an independent subscriber that sees the events published from its start, in
/// order, and ends when the manager shuts down. A subscriber holds up to 4,096 unread events besides
/// outcomes: beyond, progress is dropped first, then the oldest events; an outcome (`.completed`,
/// `.failed`, `.cancelled`) is never dropped, so a reader that falls behind still learns how every
/// download ended, and a reader that keeps up loses nothing. Each event carries the download's
/// handle when one published it (``DownloadManagerEvent/download``).
///
/// To follow downloads queued with ``DownloadManager/enqueue(_:)``: start iterating first, then
/// enqueue, and match events to requests by ``DownloadRequest/id``. A request whose destination is
/// complete already gets its `.completed` at once (with ``Download/wasAlreadyComplete``).
public struct DownloadManagerEvents: AsyncSequence, Sendable {
    /// The element type.
    public typealias Element = DownloadManagerEvent
    /// The sequence never throws.
    public typealias Failure = Never

    let feed: EventFeed
    /// Outcomes only (``DownloadManager/outcomes``).
    let outcomesOnly: Bool

    package init(feed: EventFeed, outcomesOnly: Bool = false) {
        self.feed = feed
        self.outcomesOnly = outcomesOnly
    }

    /// Subscribes; events published from now on are kept for this iterator.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(subscription: EventFeed.Subscription(feed: feed, outcomesOnly: outcomesOnly))
    }

    /// Reads the manager's events.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let subscription: EventFeed.Subscription
        /// Events taken from the feed together, handed out one by one (one lock and at most one
        /// wake-up per batch).
        private var batch: [FeedEvent] = []
        private var position = 0

        init(subscription: EventFeed.Subscription) {
            self.subscription = subscription
        }

        /// The next event, or `nil` once the manager shut down, or once the reading task is
        /// cancelled and the events published before it are read (they are not lost: cancel a
        /// reader after ``DownloadManager/waitUntilIdle()`` and it still sees every outcome).
        public mutating func next() async -> DownloadManagerEvent? {
            await next(isolation: nil)
        }

        /// The next event, or `nil` once the manager shut down, or once the reading task is
        /// cancelled and the events published before it are read.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> DownloadManagerEvent? {
            if position == batch.count {
                batch = await subscription.feed.nextBatch(subscription.id)
                position = 0
                guard !batch.isEmpty else { return nil }
            }
            defer { position += 1 }
            return DownloadManagerEvent(batch[position])
        }
    }
}
