import HaulIO

/// Where a download stands in its state directory's queue, as its journal row records it.
///
/// One vocabulary for the row, used by the queue, the loop, the journal and listings such as
/// `haul --list`. The moves between states are its internal transition table's, and only its.
public enum QueueState: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Waiting in the queue for a slot.
    case queued
    /// Waiting in the queue for its retry's time (a backoff, or the server's `Retry-After`) after a
    /// transient failure; then it is admitted like a queued one.
    case waitingToRetry
    /// Admitted: a transfer holds it (or held it when its process stopped).
    case running
    /// Paused by its caller; it continues when resumed or asked for again.
    case paused
    /// It was queued, waiting or running when the process that ran it stopped; it continues when a
    /// manager resumes unfinished downloads, or when it is asked for again.
    case interrupted
    /// The file is complete at its destination.
    case completed
    /// It failed for good; its partial file is kept when it holds bytes, and asking for it again
    /// continues from them.
    case failed
    /// Cancelled by its caller: nothing fetched is kept (no partial file, no validators), and asking
    /// for it again starts anew. The row stays so that a listing says what became of it; a
    /// download into a stream, memory or nothing leaves no row.
    case cancelled

    /// The state as one word, as `haul --list` shows it.
    public var description: String { engine.description }

    /// Whether the download still has work to do (neither completed, failed nor cancelled).
    public var isUnfinished: Bool { engine.isUnfinished }
}

extension QueueState {
    /// The state as the journal records it.
    init(_ state: HaulIO.QueueState) {
        switch state {
        case .queued: self = .queued
        case .waitingToRetry: self = .waitingToRetry
        case .running: self = .running
        case .paused: self = .paused
        case .interrupted: self = .interrupted
        case .completed: self = .completed
        case .failed: self = .failed
        case .cancelled: self = .cancelled
        }
    }

    /// The state as the journal knows it.
    var engine: HaulIO.QueueState {
        switch self {
        case .queued: .queued
        case .waitingToRetry: .waitingToRetry
        case .running: .running
        case .paused: .paused
        case .interrupted: .interrupted
        case .completed: .completed
        case .failed: .failed
        case .cancelled: .cancelled
        }
    }
}
