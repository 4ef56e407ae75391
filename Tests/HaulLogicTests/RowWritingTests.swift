import Foundation
import Testing

@testable import HaulIO
@testable import HaulScheduler
@testable import HaulValues

/// What the loop keeps of callers' writes in one wake (``RowWriting``): each caller's write is undone
/// alone when its savepoint fails, whatever the writes before and after it changed.
@Suite("Callers' writes in one wake")
struct RowWritingTests {
    static func id(_ name: String) -> HaulValues.DownloadID { HaulValues.DownloadID(destinationPath: "/w/\(name)") }

    static func given(_ name: String) -> CallerGiven {
        var given = CallerGiven()
        given.confinedTo = "/\(name)"
        return given
    }

    static func writing(keeping kept: [String]) -> RowWriting {
        var table = CallerGivenTable()
        for name in kept { table.set(given("kept-\(name)"), for: id(name)) }
        return RowWriting(journal: Journal(inMemory: ()), given: table)
    }

    @Test("a write undone puts back what it replaced and drops what it added; the writes before it stay")
    func undoneAlone() {
        var writing = Self.writing(keeping: ["a"])
        writing.beginCallersWrite()
        writing.give(Self.given("first"), for: Self.id("b"))
        writing.beginCallersWrite()
        // The failing write: replaces b, changes a (kept from before the wake), adds c, follows d, queues.
        writing.give(Self.given("second"), for: Self.id("b"))
        writing.provesByOverlap(Self.id("a"))
        writing.give(newURL: URL(string: "http://h/c")!, for: Self.id("c"))
        writing.give(Self.given("again"), for: Self.id("c"))
        writing.follow(Self.id("d"), JournalRow(url: "http://h/d", destination: "/w/d"))
        writing.markQueued()
        #expect(writing.given(Self.id("a"))?.provesByOverlap == true && writing.queued)
        writing.undoCallersWrite()
        #expect(writing.given(Self.id("b"))?.confinedTo == "/first")
        #expect(writing.given(Self.id("a"))?.confinedTo == "/kept-a")
        #expect(writing.given(Self.id("a"))?.provesByOverlap == false)
        #expect(writing.given(Self.id("c")) == nil)
        #expect(writing.changes.keys.sorted { $0.rawValue < $1.rawValue } == [Self.id("b")])
        #expect(writing.followed.isEmpty && !writing.queued)
        // The next write starts clean: undoing it again changes nothing of the first.
        writing.beginCallersWrite()
        writing.markQueued()
        writing.give(Self.given("third"), for: Self.id("e"))
        #expect(writing.queued && writing.given(Self.id("e"))?.confinedTo == "/third")
        writing.beginCallersWrite()
        writing.undoCallersWrite()
        #expect(writing.queued && writing.given(Self.id("e"))?.confinedTo == "/third")
        #expect(writing.given(Self.id("b"))?.confinedTo == "/first")
    }

    @Test("a write that follows a row twice and is undone leaves the row followed as before it")
    func followedUndone() {
        var writing = Self.writing(keeping: [])
        let first = JournalRow(url: "http://h/one", destination: "/w/d")
        writing.beginCallersWrite()
        writing.follow(Self.id("d"), first)
        writing.beginCallersWrite()
        writing.follow(Self.id("d"), JournalRow(url: "http://h/two", destination: "/w/d"))
        writing.follow(Self.id("d"), JournalRow(url: "http://h/three", destination: "/w/d"))
        writing.undoCallersWrite()
        #expect(writing.followed[Self.id("d")]?.url == "http://h/one")
    }
}
