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

    /// Subscribes; events published from now on are kept for this iterator.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(subscription: EventFeed.Subscription(feed: feed))
    }

    /// Reads the manager's events.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let subscription: EventFeed.Subscription

        /// The next event, or `nil` once the manager shut down, or once the reading task is
        /// cancelled and the events published before it are read (they are not lost: cancel a
        /// reader after ``DownloadManager/waitUntilIdle()`` and it still sees every outcome).
        public mutating func next() async -> DownloadManagerEvent? {
            await subscription.feed.next(subscription.id)
        }

        /// The next event, or `nil` once the manager shut down, or once the reading task is
        /// cancelled and the events published before it are read.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> DownloadManagerEvent? {
            await subscription.feed.next(subscription.id)
        }
    }
}
