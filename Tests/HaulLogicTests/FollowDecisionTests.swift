import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulScheduler

/// What a manager does about a row another manager queued or runs (issue 59, item 4: following
/// other processes' rows is a type of its own with a pure decision).
@Suite("Following another manager's row")
struct FollowDecisionTests {
    static let mine: Int64 = 1
    static let live: Int64 = 2
    static let gone: Int64 = 3

    func decide(_ state: HaulIO.QueueState?, owner: Int64?, bytes: Int64 = 10, shown: Int64 = 10) -> FollowDecision {
        let standing = state.map {
            Journal.RowStanding(state: $0, owner: owner, bytesCommitted: bytes, totalBytes: 100)
        }
        return FollowDecision.decide(standing, ownOwner: Self.mine, shownBytes: shown) { $0 == Self.live }
    }

    @Test("completed there: published; mine again: admitted here; another live manager's: followed on")
    func decisions() {
        #expect(decide(.completed, owner: nil) == .completed)
        for state in [HaulIO.QueueState.queued, .waitingToRetry, .running] {
            #expect(decide(state, owner: Self.mine) == .ownRow, "\(state)")
            #expect(decide(state, owner: Self.live) == .followOn(owner: Self.live, progress: nil), "\(state)")
            #expect(decide(state, owner: Self.live, bytes: 25) == .followOn(owner: Self.live, progress: 25))
            // Its manager is gone: taken back with the bytes it left.
            #expect(decide(state, owner: Self.gone) == .takeBack(rowExists: true), "\(state)")
        }
    }

    @Test("paused, interrupted, failed or cancelled there, or removed: taken back")
    func takenBack() {
        for state in [HaulIO.QueueState.paused, .interrupted, .failed, .cancelled] {
            #expect(decide(state, owner: Self.live) == .takeBack(rowExists: true), "\(state)")
        }
        #expect(decide(nil, owner: nil) == .takeBack(rowExists: false))
    }
}
