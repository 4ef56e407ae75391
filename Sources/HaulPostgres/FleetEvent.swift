/// What happens to a row of the fleet's queue: the events of its state machine
/// (``FleetState/after(_:)``).
enum FleetEvent: Hashable, CaseIterable {
    /// A worker claims it (``FleetQueue/claim(upTo:)``).
    case claimed
    /// Its lease ran out: its worker stopped renewing (killed, hung, cut off).
    case leaseExpired
    /// Its worker gives it back (``FleetQueue/release(_:)``).
    case released
    /// Its worker records how it ended (``FleetQueue/record(_:)``, ``FleetQueue/settle(_:as:)``).
    case completed, failed, pausedByWorker, cancelledByWorker
    /// Any process asks for a pause (``FleetQueue/pause(_:)``) or a cancel (``FleetQueue/cancel(_:)``).
    case pauseAsked, cancelAsked
    /// Any process queues a paused row again (``FleetQueue/resume(_:)``).
    case resumed
}

/// What an event does to a row.
enum FleetTransition: Hashable {
    /// The row takes this state.
    case moves(to: FleetState)
    /// The row is running: the request is left for its worker (the `requested` column), which
    /// settles it at its next renewal.
    case asksWorker
    /// Nothing: the event does not apply to a row in this state.
    case refused
}
