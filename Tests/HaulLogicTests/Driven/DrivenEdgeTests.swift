import FoundationEssentials
import Testing

@testable import Haul
@testable import HaulTestSupport

/// The promise at its edges, driven by hand: a file that changes between connections or between
/// processes is never spliced, a name chosen for the caller never replaces a file, and what a
/// server asks for is bounded.
@Suite struct DrivenEdgeTests {
    let body = [UInt8].pattern(524_288, seed: 66)
    let newer = [UInt8].pattern(524_288, seed: 67)

    @Test func aSegmentFromAChangedFileIsNeverSpliced() async throws {
        let driven = try DrivenManager.segmented()
        let download = try driven.download("/changing")
        let first = try driven.nextRequest()
        let head = "HTTP/1.1 200 OK\r\nETag: \"old\"\r\nAccept-Ranges: bytes\r\nContent-Length: 524288\r\n\r\n"
        driven.send(Array(head.utf8) + body[0..<1_000], on: first.connection)
        let second = try #require(driven.requests().first)
        #expect(second.header("If-Range") == "\"old\"")
        // The file changed meanwhile: the server answers the segment's If-Range with the new file whole.
        driven.answer(second, [("ETag", "\"new\"")], body: newer, all: false)
        driven.send(Array(body[1_000...]), on: first.connection, all: false)
        driven.serve(download, step: .milliseconds(300)) { request in
            // From here on the server has the new file only.
            if let start = request.range?.first, request.header("If-Range") == "\"new\"" {
                driven.answer(
                    request,
                    status: 206,
                    [("ETag", "\"new\""), ("Content-Range", "bytes \(start)-524287/524288")],
                    body: Array(newer[start...]),
                    all: false
                )
            } else {
                driven.answer(request, [("ETag", "\"new\"")], body: newer, all: false)
            }
        }
        #expect(download.stateCase == .completed)
        // One version whole, not a splice: the new one, which the server had from then on.
        #expect(driven.holds("changing", newer))
        await driven.shutdown()
    }

    @Test func aSegmentsRangeFromAnotherVersionIsNeverSpliced() async throws {
        let driven = try DrivenManager.segmented()
        let download = try driven.download("/ignores-if-range")
        let first = try driven.nextRequest()
        let head = "HTTP/1.1 200 OK\r\nETag: \"old\"\r\nAccept-Ranges: bytes\r\nContent-Length: 524288\r\n\r\n"
        driven.send(Array(head.utf8) + body[0..<1_000], on: first.connection)
        let second = try #require(driven.requests().first)
        // A server that ignores If-Range: the asked range, of the new file, under its new tag.
        driven.answer(
            second,
            status: 206,
            [("ETag", "\"new\""), ("Content-Range", "bytes 262144-524287/524288")],
            body: Array(newer[262_144...]),
            all: false
        )
        driven.send(Array(body[1_000...]), on: first.connection, all: false)
        driven.serve(download, step: .milliseconds(300)) { request in
            driven.answer(request, [("ETag", "\"new\"")], body: newer, all: false)
        }
        #expect(download.stateCase == .completed)
        #expect(driven.holds("ignores-if-range", newer), "one version whole, not a splice")
        await driven.shutdown()
    }

    @Test func aSplitDownloadStartedAgainAsksOnlyForWhatItLacks() async throws {
        let first = try DrivenManager.segmented()
        let folder = first.directory
        _ = try first.download("/split-restart")
        let own = try first.nextRequest()
        let head = "HTTP/1.1 200 OK\r\nETag: \"s\"\r\nAccept-Ranges: bytes\r\nContent-Length: 524288\r\n\r\n"
        first.send(Array(head.utf8) + body[0..<100_000], on: own.connection)
        let other = try #require(first.requests().first)
        let segmentHead =
            "HTTP/1.1 206 Partial Content\r\nETag: \"s\"\r\nContent-Range: bytes 262144-524287/524288\r\nContent-Length: 262144\r\n\r\n"
        first.send(Array(segmentHead.utf8) + body[262_144..<400_000], on: other.connection)
        await first.shutdown(keepingFiles: true)

        let second = try DrivenManager.segmented(in: folder)
        var asked: [Int] = []
        for _ in 0..<6 where !(second.exists("split-restart")) {
            second.advance(by: .milliseconds(300))
            for request in second.requests() {
                let range = try #require(request.range)
                asked.append(range.first)
                #expect(request.header("If-Range") == "\"s\"")
                let last = range.last ?? body.count - 1
                second.answer(
                    request,
                    status: 206,
                    [("ETag", "\"s\""), ("Content-Range", "bytes \(range.first)-\(last)/524288")],
                    body: Array(body[range.first...last]),
                    all: false
                )
            }
        }
        #expect(second.holds("split-restart", body))
        // Every byte that was on disk when the first manager stopped stays: nothing before 100,000
        // of the first segment, nothing between 262,144 and 400,000 of the second, is asked again.
        #expect(!asked.isEmpty)
        for start in asked {
            #expect(start >= 100_000 && !(262_144..<400_000).contains(start), "bytes=\(start)-")
        }
        await second.shutdown()
    }

    @Test func aNameChosenForTheCallerNeverReplacesAFile() async throws {
        let driven = try DrivenManager()
        let mine = Array("mine".utf8)
        try Data(mine).write(to: driven.file("kept"))
        let download = try driven.download("/kept") { $0.replacesExistingFile = false }
        driven.answer(try driven.nextRequest(), body: .pattern(1_000))
        #expect(download.stateCase == .completed)
        #expect(driven.holds("kept", mine))
        #expect(driven.holds("kept.1", .pattern(1_000)))
        await driven.shutdown()
    }

    @Test func theServersFileNameGoesBesideWhatIsThere() async throws {
        let driven = try DrivenManager()
        let folder = driven.directory.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data("old".utf8).write(to: folder.appendingPathComponent("report.pdf"))
        let download = try driven.manager.download(DownloadRequest(url: driven.url("/get?id=1"), folder: folder))
        driven.answer(
            try driven.nextRequest(),
            [("Content-Disposition", "attachment; filename=\"report.pdf\"")],
            body: .pattern(700)
        )
        #expect(download.stateCase == .completed)
        #expect(download.destination.lastPathComponent == "report.pdf.1")
        #expect(try Data(contentsOf: folder.appendingPathComponent("report.pdf")) == Data("old".utf8))
        await driven.shutdown()
    }

    @Test func aServerAskingToWaitADayWaitsAnHourAtMost() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/greedy")
        driven.answer(try driven.nextRequest(), status: 503, [("Retry-After", "86400")])
        #expect(driven.retryDelay(of: download) == .seconds(3600))
        driven.advance(by: .seconds(3600) + .milliseconds(1))
        #expect(driven.requests().count == 1)
        await driven.shutdown()
    }

    @Test func anExpectedSizeThatTheServerContradictsFails() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/sized") { $0.expectedSize = 5_000 }
        driven.answer(try driven.nextRequest(), body: .pattern(4_000))
        // As documented: a server announcing another length fails the download at once.
        driven.expectFailed(download, .checksumMismatch, leavingNo: "sized")
        await driven.shutdown()
    }

    @Test func aResumeAnsweredWithAnotherTotalStartsOver() async throws {
        let driven = try DrivenManager()
        let small = [UInt8].pattern(6_000, seed: 68)
        let download = try driven.download("/total-changed")
        driven.cut(try driven.nextRequest(), [("ETag", "\"t\"")], body: small[...], after: 3_000)
        driven.advancePastRetry(of: download)
        let second = try driven.nextRequest()
        #expect(second.header("Range") == "bytes=3000-")
        // Same tag, but the total says another file: not spliced.
        driven.answer(
            second,
            status: 206,
            [("ETag", "\"t\""), ("Content-Range", "bytes 3000-6999/7000")],
            body: Array(small[3_000...])
                + [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].flatMap { _ in [UInt8](repeating: 9, count: 100) }
        )
        driven.serve(download, rounds: 4) { request in
            #expect(request.range == nil)
            driven.answer(request, [("ETag", "\"t2\"")], body: small)
        }
        #expect(download.stateCase == .completed)
        #expect(driven.holds("total-changed", small))
        await driven.shutdown()
    }
}
