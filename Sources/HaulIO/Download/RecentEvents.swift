/// One download's events waiting for one reader of its ``DownloadEvents`` (``EventHub``): at most
/// ``EventHub/subscriberBufferLimit``, a progress replacing the progress before it, a progress
/// dropped first past the limit (else the oldest event); a read takes one event.
struct RecentEvents: SubscriberBuffer {
    private(set) var events: [DownloadEvent] = []

    init() {}

    init(_ events: [DownloadEvent]) { self.events = events }

    var isEmpty: Bool { events.isEmpty }
    var count: Int { events.count }

    func accepts(_ event: DownloadEvent) -> Bool { true }

    mutating func keep(_ event: DownloadEvent) {
        if case .progress = event, let last = events.last, case .progress = last {
            events[events.count - 1] = event
            return
        }
        // A download's usual events (connecting, receiving, progress, completed) in one allocation:
        // grown one by one, a buffer took three (30,000 in 10,000 small downloads).
        if events.capacity == 0 { events.reserveCapacity(4) }
        events.append(event)
        if events.count > EventHub.subscriberBufferLimit {
            // Drop a progress first if there is one, else the oldest event.
            if let index = events.firstIndex(where: { if case .progress = $0 { true } else { false } }) {
                events.remove(at: index)
            } else {
                events.removeFirst()
            }
        }
    }

    mutating func take() -> DownloadEvent? { events.removeFirst() }

    static func delivery(of event: DownloadEvent) -> DownloadEvent? { event }
    static var end: DownloadEvent? { nil }
    static var readsBufferAfterCancel: Bool { false }
}
