import Foundation
import Testing

@testable import HaulIO
@testable import HaulScheduler
@testable import HaulTransfer
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

    @Test("a row asked for again in a write that is undone is handed to its transfer as the write before left it")
    func askedUndone() {
        var writing = Self.writing(keeping: [])
        var first = JournalRow(url: "http://h/e", destination: "/w/e")
        first.expectedSize = 10
        writing.beginCallersWrite()
        writing.noteAsked(Self.id("e"), first)
        writing.beginCallersWrite()
        var second = first
        second.expectedSize = 20
        writing.noteAsked(Self.id("e"), second)
        writing.noteAsked(Self.id("f"), JournalRow(url: "http://h/f", destination: "/w/f"))
        writing.undoCallersWrite()
        #expect(writing.asked[Self.id("e")]?.expectedSize == 10)
        #expect(writing.asked[Self.id("f")] == nil)
    }

    @Test(
        "what a caller gave makes the request with the row until the download is forgotten; a row alone makes it without"
    )
    func givenUntilForgotten() throws {
        var table = CallerGivenTable()
        let id = Self.id("a")
        let secret = try #require(URL(string: "http://user:pass@h/a"))
        table.set(
            CallerGiven(
                url: secret,
                headers: [HaulValues.DownloadHeader("X-Key", "v")],
                urls: [],
                logger: nil,
                context: nil,
                stream: nil,
                provesByOverlap: false,
                confinedTo: "/out"
            ),
            for: id
        )
        let row = JournalRow(url: "http://h/a", destination: "/out/a")
        let request = try #require(table.request(for: id, record: row, rowID: nil))
        #expect(request.url == secret && request.headers?.first?.value == "v" && request.confinedTo == "/out")
        // A later attempt (after a pause or a retry) is made from the same.
        #expect(table.request(for: id, record: row, rowID: nil)?.url == secret)
        table.forget(id)  // ended
        let bare = try #require(table.request(for: id, record: row, rowID: nil))
        #expect(bare.url.absoluteString == "http://h/a" && bare.headers == nil && bare.confinedTo == nil)
        #expect(table[id] == nil)
        table.set(nil, for: id)
        #expect(table[id] == nil)
    }
}
