import Testing

@testable import HaulPostgres
@testable import HaulTestSupport

/// The fleet row's state machine (issue 40, item 3): every state × event, and the SQL derived from it.
@Suite("The fleet row's states")
struct FleetStateTests {
    /// Every pair that is not refused; all others are.
    static let table: [FleetEvent: [FleetState: FleetTransition]] = [
        .claimed: [.queued: .moves(to: .running)],
        .leaseExpired: [.running: .moves(to: .queued)],
        .released: [.running: .moves(to: .queued)],
        .completed: [.running: .moves(to: .completed)],
        .failed: [.running: .moves(to: .failed)],
        .pausedByWorker: [.running: .moves(to: .paused)],
        .cancelledByWorker: [.running: .moves(to: .cancelled)],
        .pauseAsked: [.queued: .moves(to: .paused), .running: .asksWorker],
        .cancelAsked: [.queued: .moves(to: .cancelled), .paused: .moves(to: .cancelled), .running: .asksWorker],
        .resumed: [.paused: .moves(to: .queued)],
    ]

    @Test("every state × event is as the table says; final states accept nothing")
    func transitions() {
        #expect(Set(Self.table.keys) == Set(FleetEvent.allCases))
        for event in FleetEvent.allCases {
            for state in FleetState.allCases {
                #expect(state.after(event) == Self.table[event]?[state] ?? .refused, "\(state) after \(event)")
            }
        }
        for state in [FleetState.completed, .failed, .cancelled] {
            #expect(FleetEvent.allCases.allSatisfy { state.after($0) == .refused })
        }
    }

    @Test("the SQL conditions and targets come from the table")
    func derivedSQL() {
        #expect(FleetState.sqlCondition(accepting: .claimed) == "state = 'queued'")
        #expect(FleetState.sqlCondition(accepting: .leaseExpired) == "state = 'running'")
        #expect(FleetState.sqlCondition(accepting: .cancelAsked) == "state IN ('queued', 'paused')")
        #expect(FleetState.sqlCondition(accepting: .cancelAsked, asking: true) == "state = 'running'")
        #expect(FleetState.sqlCondition(accepting: .completed, column: "d.state") == "d.state = 'running'")
        #expect(FleetState.target(of: .claimed) == .running)
        #expect(FleetState.target(of: .released) == .queued && FleetState.target(of: .resumed) == .queued)
        // The claim statements use the conditions the partial indexes are made for.
        #expect(FleetSchema.claim.contains("WHERE state = 'queued'"))
        #expect(FleetSchema.requeueExpired.contains("WHERE state = 'running'"))
        for state in FleetState.allCases {
            if let event = state.recordedEvent { #expect(FleetState.target(of: event) == state) }
        }
    }

    @Test(
        "a worker cut off from the database tries again after 0.2 s, then twice as long, never more than 5 s nor a third of the lease"
    )
    func retryDelays() {
        func delays(lease: Duration, count: Int) -> [Duration] {
            var previous: Duration?
            return (0..<count).map { _ in
                let next = FleetWorker.retryDelay(after: previous, lease: lease)
                previous = next
                return next
            }
        }
        #expect(
            delays(lease: .seconds(30), count: 8)
                == [0.2, 0.4, 0.8, 1.6, 3.2, 5, 5, 5].map { Duration.milliseconds(Int64($0 * 1000)) }
        )
        // With 1 s leases: back within a third of a second of the server's start, well inside the
        // lease's length for which it keeps the leases of before (3.2 s, before: another worker
        // requeued this one's downloads and fetched them again).
        #expect(
            delays(lease: .seconds(1), count: 4) == [.milliseconds(200)] + Array(repeating: .seconds(1) / 3, count: 3)
        )
        #expect(delays(lease: .milliseconds(300), count: 2) == [.milliseconds(100), .milliseconds(100)])
    }
}
