/// What an event does to a row in a given state.
package enum QueueTransition: Equatable, Sendable {
    /// The row moves to (or, for a checkpoint, stays in) this state.
    case moves(to: QueueState)
    /// The row is already where the event would put it (a request for a download already queued,
    /// waiting or running): nothing changes.
    case unchanged
    /// The event does not apply in this state: nothing changes.
    case refused
}
