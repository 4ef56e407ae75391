/// Every download's events waiting for one reader of the manager's ``DownloadManagerEvents``
/// (``EventFeed``): a read takes all of them. Past ``EventFeed/subscriberBufferLimit`` events besides
/// final ones, a new progress is dropped (a newer one follows), and for any other event the oldest
/// progress (else the oldest event that is not final) goes. Final events are never dropped, so a
/// reader that falls behind still learns every outcome.
struct EventBacklog: SubscriberBuffer {
    private var events: [FeedEvent] = []
    /// Unread final events (completed, failed, cancelled), which do not count against the limit.
    private var finalCount = 0
    /// Keeps outcomes only (``DownloadManager/outcomes``).
    let outcomesOnly: Bool

    init() { outcomesOnly = false }

    init(outcomesOnly: Bool) { self.outcomesOnly = outcomesOnly }

    func accepts(_ event: FeedEvent) -> Bool { !outcomesOnly || event.event.isFinal }

    var count: Int { events.count }
    var isEmpty: Bool { events.isEmpty }

    mutating func keep(_ event: FeedEvent) {
        // An outcome takes no room from the others: it is only added.
        if !event.event.isFinal, events.count - finalCount >= EventFeed.subscriberBufferLimit {
            if case .progress = event.event { return }
            let index =
                events.firstIndex { if case .progress = $0.event { true } else { false } }
                ?? events.firstIndex { !$0.event.isFinal }
            if let index { events.remove(at: index) }
        }
        if event.event.isFinal { finalCount += 1 }
        events.append(event)
    }

    /// Every unread event, oldest first.
    mutating func take() -> [FeedEvent] {
        let taken = events
        // The next batch is likely as long: one allocation for it, not one per doubling (up to
        // 1,024 events: a reader that fell behind once does not keep a large buffer).
        events = []
        events.reserveCapacity(min(taken.count, 1024))
        finalCount = 0
        return taken
    }

    static func delivery(of event: FeedEvent) -> [FeedEvent] { [event] }
    static var end: [FeedEvent] { [] }
    static var readsBufferAfterCancel: Bool { true }
}
