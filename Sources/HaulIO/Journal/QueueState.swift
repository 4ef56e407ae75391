/// Where a download stands in its state directory's queue, as its journal row records it: one
/// vocabulary for the row, used by the queue, the loop, the journal and listings (the facade's public
/// `QueueState`, case for case, says what each means). The moves between states are its transition
/// table's, and only its.
package enum QueueState: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case queued
    case waitingToRetry
    case running
    case paused
    case interrupted
    case completed
    case failed
    case cancelled

    /// The state as one word, as `haul --list` shows it.
    package var description: String {
        switch self {
        case .queued: "queued"
        case .waitingToRetry: "waitingToRetry"
        case .running: "running"
        case .paused: "paused"
        case .interrupted: "interrupted"
        case .completed: "completed"
        case .failed: "failed"
        case .cancelled: "cancelled"
        }
    }

    /// Whether the download still has work to do (neither completed, failed nor cancelled).
    package var isUnfinished: Bool { self != .completed && self != .failed && self != .cancelled }
}

extension QueueState {
    /// The `state` column's value. A download waiting to retry is stored `queued` with its time in
    /// `retry_at`, so that one index finds every row the queue may admit.
    var column: String {
        switch self {
        case .queued, .waitingToRetry: "queued"
        case .running: "running"
        case .paused: "paused"
        case .interrupted: "interrupted"
        case .completed: "completed"
        case .failed: "failed"
        case .cancelled: "cancelled"
        }
    }

    /// The state a row stored as `column` with `retryAt` is in; an unknown value (a newer Haul's)
    /// reads as interrupted, so that it is neither lost nor run twice.
    init(column: String, retryAt: Double) {
        switch column {
        case "queued": self = retryAt > 0 ? .waitingToRetry : .queued
        case "running": self = .running
        case "paused": self = .paused
        case "completed": self = .completed
        case "failed": self = .failed
        case "cancelled": self = .cancelled
        default: self = .interrupted
        }
    }

    /// An SQL condition true for the rows whose state is one of `states`: `state = 'a'` or
    /// `state IN ('a', 'b')` (one value as `=`, so that the partial index's condition matches).
    static func sqlCondition(_ states: [QueueState]) -> String {
        var columns: [String] = []
        for state in states where !columns.contains(state.column) { columns.append(state.column) }
        if columns.count == 1 { return "state = '\(columns[0])'" }
        return "state IN (\(columns.map { "'\($0)'" }.joined(separator: ", ")))"
    }

    /// An SQL condition true for the rows in which `event` moves the row to `target`.
    static func sqlCondition(accepting event: QueueEvent, to target: QueueState) -> String {
        sqlCondition(allCases.filter { $0.after(event) == .moves(to: target) })
    }
}
