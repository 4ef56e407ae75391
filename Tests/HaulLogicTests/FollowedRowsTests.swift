import Testing

@testable import HaulIO
@testable import HaulScheduler
@testable import HaulValues

/// The rows a manager follows, in a type of their own (issue 59, item 4): when a journal needs no
/// new look, and what a caller's pause, cancel and resume do to a followed row.
@Suite("Followed rows")
struct FollowedRowsTests {
    let first = HaulValues.DownloadID(rawValue: "first")
    let second = HaulValues.DownloadID(rawValue: "second")
    let record = JournalRow(url: "http://example.com/f", destination: "/tmp/f")

    @Test("a journal is looked at again until every row's owner is known, then only when it changed or an owner left")
    func aLookIsSkippedOnlyWhenNothingChanged() {
        var rows = FollowedRows()
        rows.follow([first: record, second: record], in: "/state")
        #expect(rows.byDirectory()["/state"]?.count == 2)
        func unchanged(_ version: Int64?, _ isLive: (Int64) -> Bool = { $0 == 7 }) -> Bool {
            rows.areUnchanged([first, second], in: "/state", version: version, isLive: isLive)
        }
        // No owner seen yet: looked at, whatever the version.
        let unseen = unchanged(1)
        rows.saw(first, owner: 7, shownBytes: 10)
        let halfSeen = unchanged(1)
        rows.saw(second, owner: 7, shownBytes: nil)
        #expect(!unseen && !halfSeen)
        #expect(rows[first]?.shownBytes == 10 && rows[second]?.shownBytes == -1)
        // Every owner seen, the same version, the owner still runs: skipped. Another commit there:
        // looked at (and the new version kept).
        let same = unchanged(1)
        let committed = unchanged(2)
        let sameAgain = unchanged(2)
        #expect(same && !committed && sameAgain)
        // The owner is gone: looked at; no version (a read that failed): looked at.
        let ownerGone = unchanged(2, { _ in false })
        let noVersion = unchanged(nil)
        #expect(!ownerGone && !noVersion)
        // A journal no row is followed in forgets its version: the next row there is looked at.
        _ = unchanged(2)
        rows.keepVersions(of: [String]())
        let forgotten = unchanged(2)
        #expect(!forgotten)
    }

    @Test("a paused row is not followed until resumed; a cancel ends it followed or paused; the rest stop alone")
    func pauseCancelAndResume() {
        var rows = FollowedRows()
        rows.follow([first: record, second: record], in: "/state")
        let paused = rows.pause(first)
        let pausedAgain = rows.pause(first)
        #expect(paused && !pausedAgain && rows[first] == nil)
        let resumed = rows.takePaused(first)
        let resumedAgain = rows.takePaused(first)
        #expect(resumed?.directory == "/state" && resumedAgain == nil)
        let cancelled = rows.cancel(second)
        let cancelledAgain = rows.cancel(second)
        #expect(cancelled && !cancelledAgain && rows[second] == nil && rows.isEmpty)
        // Cancelled while paused: nothing is left to resume.
        rows.follow([first: record], in: "/state")
        let pausedThenCancelled = rows.pause(first) && rows.cancel(first)
        let left = rows.takePaused(first)
        #expect(pausedThenCancelled && left == nil)
        rows.follow([second: record], in: "/other")
        rows.stop(second)
        #expect(rows.isEmpty && rows.byDirectory().isEmpty)
        rows.follow([first: record], in: "/state")
        rows.removeAll()
        let afterShutdown = rows.takePaused(first)
        #expect(rows.isEmpty && afterShutdown == nil)
    }
}
