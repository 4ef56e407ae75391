import Haul
import Synchronization

/// The downloads of one `haul` run, followed by id on the manager's feed until each has an outcome:
/// shared by the task that reads the feed and the one that queues the list.
///
/// A list of millions is followed at about 32 bytes a download (its id's 128 bits and its position in
/// the list, in a dictionary): what is shown of it, its URL, is read again from the list
/// (``EntrySource/url(at:)``), and its name from its events. Keeping the id's text and the list's
/// item per download instead, a run over 100,000 URLs peaked at 43 MB of heap (24 MB with this).
final class Following: Sendable {
    /// How the run's downloads ended.
    struct Outcome {
        var completed = 0
        var failed = 0
        /// Neither: cancelled, or left without an outcome (paused).
        var notCompleted = 0
    }

    /// A download followed: its position in the list (the first item that asks for it: two items
    /// with one destination are one download), and where its events do not say its name, the
    /// destination the list gave it.
    struct Followed: Equatable {
        var index: Int
        var destination: String?
    }

    /// A download's id as its 128 bits, where it has the form haul makes (32 hexadecimal digits).
    struct Key: Hashable {
        let high: UInt64
        let low: UInt64

        init?(_ id: DownloadID) {
            var high: UInt64 = 0
            var low: UInt64 = 0
            var count = 0
            for digit in id.rawValue.utf8 {
                let value: UInt64
                switch digit {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt64(digit &- UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): value = UInt64(digit &- UInt8(ascii: "a") &+ 10)
                default: return nil
                }
                // The high 64 bits fill first; once they are full, the low ones.
                if count < 16 { high = high << 4 | value } else { low = low << 4 | value }
                count += 1
                if count > 32 { return nil }
            }
            guard count == 32 else { return nil }
            (self.high, self.low) = (high, low)
        }
    }

    private struct State {
        /// The downloads without an outcome yet: their position in the list.
        var pending: [Key: Int] = [:]
        /// The same for ids of another form (a caller's own; none of haul's requests).
        var pendingByID: [DownloadID: Int] = [:]
        /// By position, the destinations the events do not show (a name the server gives).
        var destinations: [Int: String] = [:]
        /// The whole list went to `enqueue` (or it stopped): no download joins `pending`.
        var queued = false
        var outcome = Outcome()

        var isEmpty: Bool { pending.isEmpty && pendingByID.isEmpty }

        func index(of id: DownloadID) -> Int? {
            if let key = Key(id) { return pending[key] }
            return pendingByID[id]
        }

        mutating func remove(_ id: DownloadID) {
            let index = Key(id).map { pending.removeValue(forKey: $0) } ?? pendingByID.removeValue(forKey: id)
            if let index, !destinations.isEmpty { destinations[index] = nil }
        }
    }

    private let state = Mutex(State())

    /// Follows the download `id`, item `index` of the list, unless an earlier item asks for the same
    /// download (the same destination): returns whether it is new. `destination`: where the list
    /// names it, when its events will not (its file takes the server's name).
    func follow(_ id: DownloadID, index: Int, destination: String? = nil) -> Bool {
        state.withLock { state in
            guard state.index(of: id) == nil else { return false }
            if let key = Key(id) {
                state.pending[key] = index
            } else {
                state.pendingByID[id] = index
            }
            if let destination { state.destinations[index] = destination }
            return true
        }
    }

    /// Which item an event of download `id` is shown for; `nil` when it is not followed (another
    /// download of the journal, or one that ended).
    func followed(_ id: DownloadID) -> Followed? {
        state.withLock { state in
            guard let index = state.index(of: id) else { return nil }
            return Followed(index: index, destination: state.destinations.isEmpty ? nil : state.destinations[index])
        }
    }

    /// Takes the outcome of `event`; returns whether the run has nothing left to follow.
    func ended(_ event: DownloadManagerEvent) -> Bool {
        state.withLock { state in
            switch event.event {
            case .completed: state.outcome.completed += 1
            case .failed: state.outcome.failed += 1
            case .cancelled: state.outcome.notCompleted += 1
            default: return false
            }
            state.remove(event.id)
            return state.queued && state.isEmpty
        }
    }

    /// `enqueue` refused the request of item `index` (its error is reported).
    func refused(_ id: DownloadID, index: Int) {
        state.withLock { state in
            if state.index(of: id) == index { state.remove(id) }
        }
    }

    /// The list is queued (or queuing stopped); returns whether nothing is left to follow.
    func allQueued() -> Bool {
        state.withLock { state in
            state.queued = true
            return state.isEmpty
        }
    }

    /// The outcome, once no event will come: a download still followed has none (paused, or never
    /// queued) and counts as not completed.
    func finish() -> Outcome {
        state.withLock { state in
            state.outcome.notCompleted += state.pending.count + state.pendingByID.count
            state.pending = [:]
            state.pendingByID = [:]
            state.destinations = [:]
            return state.outcome
        }
    }
}
