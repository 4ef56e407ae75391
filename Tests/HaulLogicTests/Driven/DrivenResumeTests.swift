import FoundationEssentials
import Testing

@testable import Haul
@testable import HaulTestSupport

/// Resumes driven by hand: each attempt's request (`Range`, `If-Range`) and what each answer does
/// to the bytes on disk. A changed file is never spliced onto an old one.
@Suite struct DrivenResumeTests {
    let body = [UInt8].pattern(8_000, seed: 3)

    @Test func aCutBodyResumesFromItsLastByteWithTheETag() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/cut")
        driven.cut(try driven.nextRequest(), [("ETag", "\"v1\"")], body: body[...], after: 3_000)
        #expect(download.stateCase == .waitingToRetry)
        #expect(download.progress.bytesReceived == 3_000)
        driven.advancePastRetry(of: download)
        let second = try driven.nextRequest()
        #expect(second.header("Range") == "bytes=3000-")
        #expect(second.header("If-Range") == "\"v1\"")
        driven.answer(
            second,
            status: 206,
            [("ETag", "\"v1\""), ("Content-Range", "bytes 3000-7999/8000")],
            body: Array(body[3_000...])
        )
        #expect(download.stateCase == .completed)
        #expect(download.progress.totalBytes == 8_000)
        #expect(driven.holds("cut", body))
        await driven.shutdown()
    }

    @Test func aResumeWithOnlyLastModifiedSendsItAsIfRange() async throws {
        let driven = try DrivenManager()
        let modified = "Wed, 21 Oct 2015 07:28:00 GMT"
        let download = try driven.download("/lm")
        // Sent a day after it changed: a strong validator (RFC 9110, 8.8.2.2).
        let date = ("Date", "Thu, 22 Oct 2015 07:28:00 GMT")
        driven.cut(try driven.nextRequest(), [("Last-Modified", modified), date], body: body[...], after: 2_000)
        driven.advancePastRetry(of: download)
        let second = try driven.nextRequest()
        #expect(second.header("Range") == "bytes=2000-")
        #expect(second.header("If-Range") == modified)
        driven.answer(
            second,
            status: 206,
            [("Last-Modified", modified), date, ("Content-Range", "bytes 2000-7999/8000")],
            body: Array(body[2_000...])
        )
        #expect(driven.holds("lm", body))
        await driven.shutdown()
    }

    @Test func aChangedFileAnsweredWholeReplacesThePartial() async throws {
        let driven = try DrivenManager()
        let newer = [UInt8].pattern(6_000, seed: 99)
        let download = try driven.download("/changed")
        driven.cut(try driven.nextRequest(), [("ETag", "\"v1\"")], body: body[...], after: 3_000)
        driven.advancePastRetry(of: download)
        // If-Range did not match: the server sends the new version whole.
        driven.answer(try driven.nextRequest(), [("ETag", "\"v2\"")], body: newer)
        #expect(download.stateCase == .completed)
        #expect(driven.holds("changed", newer))
        await driven.shutdown()
    }

    @Test func aRangeAnsweredFromTheWrongByteIsNeverSpliced() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/wrong")
        driven.cut(try driven.nextRequest(), [("ETag", "\"v1\"")], body: body[...], after: 3_000)
        driven.advancePastRetry(of: download)
        driven.answer(
            try driven.nextRequest(),
            status: 206,
            [("ETag", "\"v1\""), ("Content-Range", "bytes 2000-7999/8000")],
            body: Array(body[2_000...])
        )
        #expect(download.stateCase != .completed)
        // Whatever follows, the file that appears is the server's, never a splice.
        driven.serve(download, rounds: 6) { request in
            if let start = request.range?.first, start > 0 {
                driven.answer(
                    request,
                    status: 206,
                    [("ETag", "\"v1\""), ("Content-Range", "bytes \(start)-7999/8000")],
                    body: Array(body[start...])
                )
            } else {
                driven.answer(request, [("ETag", "\"v1\"")], body: body)
            }
        }
        #expect(download.stateCase == .completed)
        #expect(driven.holds("wrong", body))
        await driven.shutdown()
    }

    @Test func aServerThatIgnoresTheRangeRestartsFromByteZero() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/ignored")
        driven.cut(try driven.nextRequest(), [("ETag", "\"v1\"")], body: body[...], after: 3_000)
        driven.advancePastRetry(of: download)
        let second = try driven.nextRequest()
        #expect(second.header("Range") == "bytes=3000-")
        driven.answer(second, [("ETag", "\"v1\"")], body: body)
        #expect(download.stateCase == .completed)
        #expect(driven.holds("ignored", body))
        await driven.shutdown()
    }

    @Test func theTotalIsWhatWasOnDiskPlusTheAnswersLength() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/total")
        driven.cut(try driven.nextRequest(), [("ETag", "\"t\"")], body: body[...], after: 5_000)
        driven.advancePastRetry(of: download)
        let second = try driven.nextRequest()
        // Head and the first bytes only: the total is known before the body is.
        driven.send(
            Array(
                "HTTP/1.1 206 Partial Content\r\nETag: \"t\"\r\nContent-Range: bytes 5000-7999/8000\r\nContent-Length: 3000\r\n\r\n"
                    .utf8
            )
                + body[5_000..<5_100],
            on: second.connection
        )
        driven.advance(by: .milliseconds(20))  // the progress interval: the next bytes publish it
        driven.send(Array(body[5_100..<5_200]), on: second.connection)
        #expect(download.progress.totalBytes == 8_000)
        // The bytes in the file: the new ones are in the write buffer until it fills or the body ends.
        #expect(download.progress.bytesReceived == 5_000)
        driven.send(Array(body[5_200...]), on: second.connection)
        #expect(download.progress.bytesReceived == 8_000)
        #expect(driven.holds("total", body))
        await driven.shutdown()
    }

    @Test func withoutAValidatorTheNextAttemptStartsOver() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/novalidator")
        driven.cut(try driven.nextRequest(), body: body[...], after: 3_000)
        driven.advancePastRetry(of: download)
        let second = try driven.nextRequest()
        #expect(second.header("Range") == nil)
        #expect(second.header("If-Range") == nil)
        driven.answer(second, body: body)
        #expect(driven.holds("novalidator", body))
        await driven.shutdown()
    }

    @Test func anUnvalidatedResumeProvesItsOverlapFirst() async throws {
        let driven = try DrivenManager { $0.resumesWithoutValidator = true }
        let download = try driven.download("/overlap")
        driven.cut(try driven.nextRequest(), body: body[...], after: 3_000)
        driven.advancePastRetry(of: download)
        let second = try driven.nextRequest()
        let start = try #require(second.range?.first)
        #expect(second.header("If-Range") == nil)
        #expect(start < 3_000)  // it asks again for some bytes it has, to compare them
        driven.answer(
            second,
            status: 206,
            [("Content-Range", "bytes \(start)-7999/8000")],
            body: Array(body[start...])
        )
        #expect(download.stateCase == .completed)
        #expect(driven.holds("overlap", body))
        await driven.shutdown()
    }

    @Test func anOverlapThatDiffersRestartsFromByteZero() async throws {
        let driven = try DrivenManager { $0.resumesWithoutValidator = true }
        let other = [UInt8].pattern(8_000, seed: 200)
        let download = try driven.download("/differs")
        driven.cut(try driven.nextRequest(), body: body[...], after: 3_000)
        driven.advancePastRetry(of: download)
        let second = try driven.nextRequest()
        let start = try #require(second.range?.first)
        driven.answer(
            second,
            status: 206,
            [("Content-Range", "bytes \(start)-7999/8000")],
            body: Array(other[start...])
        )
        // The bytes it had are not the server's now: it starts over, and takes the new file whole.
        driven.serve(download, rounds: 4) { request in
            #expect(request.range == nil)
            driven.answer(request, body: other)
        }
        #expect(download.stateCase == .completed)
        #expect(driven.holds("differs", other))
        await driven.shutdown()
    }

    /// Asked for again from another URL (a refreshed link) while the first URL's answer is still to
    /// come: the row keeps the URL its bytes came from, so that the next attempt, to the new URL,
    /// proves them first (the overlap, with their validator) before it continues them.
    @Test func aNewURLAskedForBeforeTheOldOneAnswersIsProvedAtTheNextAttempt() async throws {
        let driven = try DrivenManager()
        let state = driven.directory.appendingPathComponent("state")
        let download = try driven.download("/old", to: "refreshed")
        let first = try driven.nextRequest()
        #expect(first.target == "/old")
        let again = try driven.download("/new", to: "refreshed")
        #expect(again.id == download.id)
        driven.cut(first, [("ETag", "\"v1\"")], body: body[...], after: 3_000)
        #expect(download.stateCase == .waitingToRetry)
        let row = try #require(try driven.manager.journalRows(in: state)?[download.id.engine])
        #expect(row.url == driven.url("/old").absoluteString)
        driven.advancePastRetry(of: download)
        let second = try driven.nextRequest()
        #expect(second.target == "/new")
        let start = try #require(second.range?.first)
        #expect(start < 3_000, "a new URL's answer repeats bytes the partial holds before it is continued")
        #expect(second.header("If-Range") == "\"v1\"")
        driven.answer(
            second,
            status: 206,
            [("ETag", "\"v1\""), ("Content-Range", "bytes \(start)-7999/8000")],
            body: Array(body[start...])
        )
        #expect(download.stateCase == .completed)
        let completed = try #require(try driven.manager.journalRows(in: state)?[download.id.engine])
        #expect(completed.url == driven.url("/new").absoluteString)
        let holds = driven.holds("refreshed", body)
        #expect(holds)
        await driven.shutdown()
    }
}
