/// The fleet row's state machine: the one table of how a row of `haul_downloads` moves. The SQL
/// that moves rows is derived from it (``sqlCondition(accepting:)``, ``target(of:)``), as the
/// journal's is from `QueueState`.
extension FleetState {
    /// What `event` does to a row in this state. Pure.
    func after(_ event: FleetEvent) -> FleetTransition {
        switch (event, self) {
        case (.claimed, .queued): .moves(to: .running)
        case (.leaseExpired, .running), (.released, .running): .moves(to: .queued)
        case (.completed, .running): .moves(to: .completed)
        case (.failed, .running): .moves(to: .failed)
        case (.pausedByWorker, .running): .moves(to: .paused)
        case (.cancelledByWorker, .running): .moves(to: .cancelled)
        case (.pauseAsked, .queued): .moves(to: .paused)
        case (.cancelAsked, .queued), (.cancelAsked, .paused): .moves(to: .cancelled)
        case (.pauseAsked, .running), (.cancelAsked, .running): .asksWorker
        case (.resumed, .paused): .moves(to: .queued)
        default: .refused
        }
    }

    /// The state `event` moves rows to (every state that accepts it moves to the same one).
    static func target(of event: FleetEvent) -> FleetState? {
        for state in allCases { if case .moves(let next) = state.after(event) { return next } }
        return nil
    }

    /// The states `event` moves, or (`asking`) the states where it is left for the worker.
    static func states(accepting event: FleetEvent, asking: Bool = false) -> [FleetState] {
        allCases.filter { state in
            switch state.after(event) {
            case .moves: !asking
            case .asksWorker: asking
            case .refused: false
            }
        }
    }

    /// `state IN ('queued', 'paused')`: the SQL condition of the rows `event` applies to (`asking`:
    /// the rows where it is left for the worker). `column` names the state column (`d.state`).
    static func sqlCondition(accepting event: FleetEvent, asking: Bool = false, column: String = "state") -> String {
        let states = states(accepting: event, asking: asking)
        precondition(!states.isEmpty, "no state accepts \(event)")
        if states.count == 1 { return "\(column) = '\(states[0].rawValue)'" }
        return "\(column) IN (\(states.map { "'\($0.rawValue)'" }.joined(separator: ", ")))"
    }

    /// The worker's event for an outcome it records as this state.
    var recordedEvent: FleetEvent? {
        switch self {
        case .completed: .completed
        case .failed: .failed
        case .paused: .pausedByWorker
        case .cancelled: .cancelledByWorker
        case .queued, .running: nil
        }
    }
}
