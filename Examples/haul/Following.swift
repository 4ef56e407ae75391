import Haul
import Synchronization

/// The downloads of one `haul` run, followed by id on the manager's feed until each has an outcome:
/// shared by the task that reads the feed and the one that queues the list.
final class Following: Sendable {
    /// How the run's downloads ended.
    struct Outcome {
        var completed = 0
        var failed = 0
        /// Neither: cancelled, or left without an outcome (paused).
        var notCompleted = 0
    }

    /// A download followed: the first item of the list that asks for it (two items with one
    /// destination are one download), and its position in the list.
    struct Followed {
        var index: Int
        var item: DownloadPlan.Item
    }

    private struct State {
        /// The downloads without an outcome yet.
        var pending: [DownloadID: Followed] = [:]
        /// The whole list went to `enqueue` (or it stopped): no download joins `pending`.
        var queued = false
        var outcome = Outcome()
    }

    private let state = Mutex(State())

    /// Follows the download `id` for `item`, item `index` of the list, unless an earlier item asks
    /// for the same download (the same destination): returns whether it is new.
    func follow(_ id: DownloadID, index: Int, item: DownloadPlan.Item) -> Bool {
        state.withLock { state in
            guard state.pending[id] == nil else { return false }
            state.pending[id] = Followed(index: index, item: item)
            return true
        }
    }

    /// The item an event of download `id` is shown for; `nil` when it is not followed (another
    /// download of the journal, or one that ended).
    func followed(_ id: DownloadID) -> Followed? {
        state.withLock { $0.pending[id] }
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
            state.pending[event.id] = nil
            return state.queued && state.pending.isEmpty
        }
    }

    /// `enqueue` refused the request of item `index` (its error is reported).
    func refused(_ id: DownloadID, index: Int) {
        state.withLock { state in
            if state.pending[id]?.index == index { state.pending[id] = nil }
        }
    }

    /// The list is queued (or queuing stopped); returns whether nothing is left to follow.
    func allQueued() -> Bool {
        state.withLock { state in
            state.queued = true
            return state.pending.isEmpty
        }
    }

    /// The outcome, once no event will come: a download still followed has none (paused, or never
    /// queued) and counts as not completed.
    func finish() -> Outcome {
        state.withLock { state in
            state.outcome.notCompleted += state.pending.count
            state.pending = [:]
            return state.outcome
        }
    }

}
