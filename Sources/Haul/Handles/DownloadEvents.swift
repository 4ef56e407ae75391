import FoundationEssentials
import HaulIO

/// The events of one download, as an `AsyncSequence`.
///
/// Each iteration is an independent subscriber: it starts with the download's current state, then
/// follows every change, and ends after the final event. Any number of tasks may iterate at once.
/// The first iteration of a download's events starts earlier, with the events published since its
/// handle was created (as many as a subscriber holds, within 2 s): a caller
/// that iterates right after `download(…)` returned misses nothing, not even a retry that happened
/// in between.
/// A subscriber that reads slowly, or not at all, holds at most a small fixed number of events:
/// progress is coalesced to the newest value and the oldest state changes are dropped first, but the
/// final event is always delivered.
public struct DownloadEvents: AsyncSequence, Sendable {
    /// The element type.
    public typealias Element = DownloadEvent
    /// The sequence never throws.
    public typealias Failure = Never

    let hub: EventHub

    /// Subscribes; events that happen from now on are kept for this iterator.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(subscription: EventHub.Subscription(hub: hub))
    }

    /// Reads a download's events.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let subscription: EventHub.Subscription

        /// The next event, or `nil` after the final one (or when the task is cancelled).
        public mutating func next() async -> DownloadEvent? {
            await subscription.hub.next(subscription.id).map(DownloadEvent.init)
        }

        /// The next event, or `nil` after the final one (or when the task is cancelled).
        public mutating func next(isolation actor: isolated (any Actor)?) async -> DownloadEvent? {
            await subscription.hub.next(subscription.id).map(DownloadEvent.init)
        }
    }
}
