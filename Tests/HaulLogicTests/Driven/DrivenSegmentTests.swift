import FoundationEssentials
import Testing

@testable import Haul
@testable import HaulTestSupport

/// A file over several connections, driven by hand: the segments each connection asks for, what
/// happens when a server will not split, and the file put together whole.
@Suite struct DrivenSegmentTests {
    /// 512 KiB: segments are at least 64 KiB (the configuration's floor).
    let body = [UInt8].pattern(524_288, seed: 55)
    let head = "HTTP/1.1 200 OK\r\nETag: \"seg\"\r\nAccept-Ranges: bytes\r\nContent-Length: 524288\r\n\r\n"

    /// Answers a segment's request from `body`.
    func answerSegment(_ request: ScriptedRequest, on driven: DrivenManager) throws {
        let range = try #require(request.range)
        // As a server does, a range past the end is answered to the end.
        let (start, last) = (range.first, min(body.count - 1, range.last ?? body.count - 1))
        driven.answer(
            request,
            status: 206,
            [("ETag", "\"seg\""), ("Content-Range", "bytes \(start)-\(last)/\(body.count)")],
            body: Array(body[start...last])
        )
    }

    @Test func anAnswerWithALengthAndAValidatorOpensASecondConnectionForTheSecondHalf() async throws {
        let driven = try DrivenManager.segmented()
        let download = try driven.download("/split")
        let first = try driven.nextRequest()
        driven.send(Array(head.utf8) + body[0..<500], on: first.connection)
        let others = driven.requests()
        #expect(others.count == 1)
        let second = try #require(others.first)
        #expect(second.connection.number == 1)
        #expect(second.header("Range") == "bytes=262144-524287")
        #expect(second.header("If-Range") == "\"seg\"")
        try answerSegment(second, on: driven)
        driven.send(Array(body[500...]), on: first.connection, all: false)
        // The first connection's answer runs on past its segment: what it sends there is not used.
        #expect(download.stateCase == .completed)
        #expect(driven.holds("split", body))
        await driven.shutdown()
    }

    @Test func aSegmentAnsweredWholeFallsBackToOneConnection() async throws {
        let driven = try DrivenManager.segmented()
        let download = try driven.download("/whole")
        let first = try driven.nextRequest()
        driven.send(Array(head.utf8) + body[0..<500], on: first.connection)
        let second = try #require(driven.requests().first)
        // The server ignores the segment's range: the whole file again, from byte 0.
        driven.answer(second, [("ETag", "\"seg\"")], body: body, all: false)
        driven.send(Array(body[500...]), on: first.connection, all: false)
        try driven.serve(download, rounds: 4) { request in
            #expect(request.range?.first != 262_144)
            if request.range != nil {
                try answerSegment(request, on: driven)
            } else {
                driven.answer(request, [("ETag", "\"seg\"")], body: body)
            }
        }
        #expect(download.stateCase == .completed)
        #expect(driven.holds("whole", body))
        await driven.shutdown()
    }

    @Test func aSmallFileIsNotSplit() async throws {
        let driven = try DrivenManager {
            $0.connectionsPerFile = 4
            $0.minimumSegmentSize = 1 << 20
        }
        let download = try driven.download("/small")
        let first = try driven.nextRequest()
        driven.send(Array(head.utf8) + body[0..<500], on: first.connection)
        #expect(driven.requests().isEmpty)
        driven.send(Array(body[500...]), on: first.connection, all: false)
        #expect(download.stateCase == .completed)
        #expect(driven.server.connections.count == 1)
        await driven.shutdown()
    }

    @Test func withoutAValidatorTheFileStaysOnOneConnection() async throws {
        let driven = try DrivenManager.segmented()
        let download = try driven.download("/novalidator")
        let first = try driven.nextRequest()
        let bare = "HTTP/1.1 200 OK\r\nAccept-Ranges: bytes\r\nContent-Length: 524288\r\n\r\n"
        driven.send(Array(bare.utf8) + body[0..<500], on: first.connection)
        #expect(driven.requests().isEmpty)
        driven.send(Array(body[500...]), on: first.connection, all: false)
        #expect(download.stateCase == .completed)
        #expect(driven.holds("novalidator", body))
        await driven.shutdown()
    }

    @Test func fourConnectionsTakeAQuarterEach() async throws {
        let driven = try DrivenManager.segmented(4)
        let download = try driven.download("/quarters")
        let first = try driven.nextRequest()
        driven.send(Array(head.utf8) + body[0..<100], on: first.connection)
        let others = driven.requests()
        let quarters: Set = ["bytes=131072-262143", "bytes=262144-393215", "bytes=393216-524287"]
        #expect(Set(others.compactMap { $0.header("Range") }) == quarters)
        for request in others { try answerSegment(request, on: driven) }
        driven.send(Array(body[100...]), on: first.connection, all: false)
        #expect(download.stateCase == .completed)
        #expect(driven.holds("quarters", body))
        await driven.shutdown()
    }

    @Test func aCutSegmentIsAskedForAgainFromWhereItStopped() async throws {
        let driven = try DrivenManager.segmented()
        let download = try driven.download("/cutsegment")
        let first = try driven.nextRequest()
        driven.send(Array(head.utf8) + body[0..<500], on: first.connection)
        let second = try #require(driven.requests().first)
        driven.cut(
            second,
            status: 206,
            [("ETag", "\"seg\""), ("Content-Range", "bytes 262144-524287/524288")],
            body: body[262_144...],
            after: 100_000
        )
        driven.send(Array(body[500...]), on: first.connection, all: false)
        var starts: [Int] = []
        try driven.serve(download, rounds: 6, step: .milliseconds(300)) { request in
            starts.append(request.range?.first ?? -1)
            try answerSegment(request, on: driven)
        }
        #expect(download.stateCase == .completed)
        #expect(driven.holds("cutsegment", body))
        // The segment's bytes that arrived are not asked for again.
        #expect(!starts.isEmpty)
        #expect(!starts.contains(262_144))
        await driven.shutdown()
    }
}
