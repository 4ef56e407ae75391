import FoundationEssentials
import Testing

@testable import Haul
@testable import HaulTestSupport

/// Retries on the manual clock: nothing is asked again before its time, and at its time exactly
/// one request goes out. What a server says (`Retry-After`) and what it did (served bytes or not)
/// set the wait.
@Suite struct DrivenRetryTests {
    let body = [UInt8].pattern(5_000, seed: 11)

    @Test func aServerErrorWaitsItsBackOffAndAsksOnceAgain() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/busy")
        driven.answer(try driven.nextRequest(), status: 503)
        #expect(download.stateCase == .waitingToRetry)
        #expect(download.stateError?.httpStatus == 503)
        let delay = try #require(driven.retryDelay(of: download))
        // Equal jitter over the first back-off (1 s): between half of it and all of it.
        #expect(delay >= .milliseconds(500) && delay <= .seconds(1))
        driven.advance(by: delay - .milliseconds(2))
        #expect(driven.requests().isEmpty)
        #expect(download.stateCase == .waitingToRetry)
        driven.advance(by: .milliseconds(3))
        let requests = driven.requests()
        #expect(requests.count == 1)
        driven.answer(try #require(requests.first), body: body)
        #expect(download.stateCase == .completed)
        #expect(driven.holds("busy", body))
        await driven.shutdown()
    }

    @Test func eachFailureDoublesTheBackOff() async throws {
        let driven = try DrivenManager { $0.retryLimit = 10 }
        let download = try driven.download("/backoff")
        var delays: [Duration] = []
        for _ in 0..<4 {
            driven.answer(try driven.nextRequest(), status: 500)
            let delay = try #require(driven.retryDelay(of: download))
            delays.append(delay)
            driven.advancePastRetry(of: download)
        }
        for (index, delay) in delays.enumerated() {
            let backOff = Duration.seconds(1 << index)
            #expect(delay >= backOff / 2 && delay <= backOff, "attempt \(index + 1): \(delay)")
        }
        await driven.shutdown()
    }

    @Test func retryAfterInSecondsSetsTheWait() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/later")
        driven.answer(try driven.nextRequest(), status: 429, [("Retry-After", "7")])
        #expect(driven.retryDelay(of: download) == .seconds(7))
        driven.advance(by: .seconds(6))
        #expect(driven.requests().isEmpty)
        driven.advance(by: .milliseconds(1_001))
        driven.answer(try driven.nextRequest(), body: body)
        #expect(download.stateCase == .completed)
        await driven.shutdown()
    }

    @Test func retryAfterAsADateCountsFromTheLoopsClock() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/date")
        // The manual clock's wall time is 1,800,000,000 s since 1970: 2027-01-15 08:00:00 GMT.
        driven.answer(try driven.nextRequest(), status: 503, [("Retry-After", "Fri, 15 Jan 2027 08:00:30 GMT")])
        #expect(driven.retryDelay(of: download) == .seconds(30))
        driven.advance(by: .seconds(29))
        #expect(driven.requests().isEmpty)
        driven.advance(by: .milliseconds(1_001))
        #expect(driven.requests().count == 1)
        await driven.shutdown()
    }

    @Test func theRetryLimitEndsInFailureWithTheLastError() async throws {
        let driven = try DrivenManager { $0.retryLimit = 2 }
        let download = try driven.download("/down")
        for attempt in 1...3 {
            driven.answer(try driven.nextRequest(), status: 502)
            if attempt < 3 {
                #expect(download.stateCase == .waitingToRetry)
                driven.advancePastRetry(of: download)
            }
        }
        #expect(download.stateCase == .failed)
        #expect(download.stateError?.httpStatus == 502)
        driven.advance(by: .seconds(120))
        #expect(driven.requests().isEmpty)
        await driven.shutdown()
    }

    @Test func anAttemptThatServedWellIsFollowedAtOnce() async throws {
        let driven = try DrivenManager()
        let large = [UInt8].pattern(400_000, seed: 5)
        let download = try driven.download("/served")
        driven.cut(try driven.nextRequest(), [("ETag", "\"s\"")], body: large[...], after: 200_000)
        let delay = try #require(driven.retryDelay(of: download))
        #expect(delay <= .milliseconds(100))  // within a tenth of the first back-off
        driven.advancePastRetry(of: download)
        let second = try driven.nextRequest()
        #expect(second.header("Range") == "bytes=200000-")
        driven.answer(
            second,
            status: 206,
            [("ETag", "\"s\""), ("Content-Range", "bytes 200000-399999/400000")],
            body: Array(large[200_000...])
        )
        #expect(driven.holds("served", large))
        await driven.shutdown()
    }

    @Test func anEmptyReplyIsRetried() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/empty-reply")
        let first = try driven.nextRequest()
        first.connection.close()
        driven.run()
        #expect(download.stateCase == .waitingToRetry)
        #expect(download.stateError?.code == .transport)
        driven.advancePastRetry(of: download)
        driven.answer(try driven.nextRequest(), body: body)
        #expect(driven.holds("empty-reply", body))
        await driven.shutdown()
    }

    @Test func aConnectionCutInTheHeadIsRetriedNotTakenForAnEmptyFile() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/half-head")
        let first = try driven.nextRequest()
        driven.send(Array("HTTP/1.1 200 OK\r\nContent-Ty".utf8), on: first.connection)
        first.connection.close()
        driven.run()
        #expect(download.stateCase == .waitingToRetry)
        #expect(!driven.exists("half-head"))
        driven.advancePastRetry(of: download)
        driven.answer(try driven.nextRequest(), body: body)
        #expect(driven.holds("half-head", body))
        await driven.shutdown()
    }

    @Test func aClientErrorIsNotRetried() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/forbidden")
        driven.answer(try driven.nextRequest(), status: 403)
        #expect(download.stateCase == .failed)
        #expect(download.stateError?.httpStatus == 403)
        driven.advance(by: .seconds(120))
        #expect(driven.requests().isEmpty)
        await driven.shutdown()
    }

    @Test func theRowSaysWhenTheRetryIsDue() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/row")
        driven.answer(try driven.nextRequest(), status: 503, [("Retry-After", "20")])
        let entry = try #require(driven.manager.journalEntry(id: download.id))
        #expect(entry.lastError?.contains("503") == true)
        #expect(entry.state == .waitingToRetry)
        driven.advance(by: .milliseconds(20_001))
        #expect(try #require(driven.manager.journalEntry(id: download.id)).state == .running)
        await driven.shutdown()
    }
}
