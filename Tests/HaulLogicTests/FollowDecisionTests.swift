import Foundation
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

    @Test("a followed row completed elsewhere passes the checks its caller here asked for, or is fetched anew")
    func checksOfTheFollowerMade() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("follow-\(UUID()).bin").path
        try Data("hello".utf8).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let hello = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        var record = JournalRow(url: "http://h/f", destination: path)
        record.totalBytes = 5
        var asked = record
        #expect(Follower.passes(record, asked))  // nothing asked
        asked.expectedChecksum = hello
        #expect(Follower.passes(record, asked))  // read from the file
        asked.expectedChecksum = "sha256:" + String(repeating: "0", count: 64)
        #expect(!Follower.passes(record, asked))
        record.expectedChecksum = asked.expectedChecksum  // checked by the manager that placed it
        #expect(Follower.passes(record, asked))
        asked = JournalRow(url: "http://h/f", destination: path)
        asked.expectedSize = 6
        #expect(!Follower.passes(record, asked))
        asked.expectedSize = 5
        #expect(Follower.passes(record, asked))
    }
}
