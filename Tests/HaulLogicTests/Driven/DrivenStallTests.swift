import FoundationEssentials
import Testing

@testable import Haul
@testable import HaulTestSupport

/// Stalls on the manual clock: a body that stops for the stall timeout ends its request and
/// resumes; one that trickles does not. (The wait for a head is curl's own low-speed check, on the
/// system's clock: not driven here.)
@Suite struct DrivenStallTests {
    let body = [UInt8].pattern(6_000, seed: 21)
    let head = "HTTP/1.1 200 OK\r\nETag: \"st\"\r\nContent-Length: 6000\r\n\r\n"

    @Test func aBodyThatStopsForTheStallTimeoutResumesWhereItStopped() async throws {
        let driven = try DrivenManager { $0.stallTimeout = .seconds(10) }
        let download = try driven.download("/stall")
        let first = try driven.nextRequest()
        driven.send(Array(head.utf8) + body[0..<2_000], on: first.connection)
        driven.advance(by: .seconds(9))
        #expect(download.stateCase == .receiving)
        // Past the timeout and the sweep after it (every 250 ms); short of the retry (500 ms or more).
        driven.advance(by: .milliseconds(1_260))
        #expect(download.stateCase == .waitingToRetry)
        #expect(download.stateError?.code == .transport)
        #expect(download.progress.bytesReceived == 2_000)
        driven.advancePastRetry(of: download)
        let second = try driven.nextRequest()
        #expect(second.header("Range") == "bytes=2000-")
        driven.answer(
            second,
            status: 206,
            [("ETag", "\"st\""), ("Content-Range", "bytes 2000-5999/6000")],
            body: Array(body[2_000...])
        )
        #expect(driven.holds("stall", body))
        await driven.shutdown()
    }

    @Test func aTrickleIsNotAStall() async throws {
        let driven = try DrivenManager { $0.stallTimeout = .seconds(10) }
        let download = try driven.download("/trickle")
        let first = try driven.nextRequest()
        driven.send(Array(head.utf8) + body[0..<100], on: first.connection)
        var sent = 100
        for _ in 0..<12 {  // two minutes, a few bytes every 8 s
            driven.advance(by: .seconds(8))
            driven.send(Array(body[sent..<sent + 10]), on: first.connection)
            sent += 10
            #expect(download.stateCase == .receiving)
        }
        driven.send(Array(body[sent...]), on: first.connection)
        #expect(download.stateCase == .completed)
        #expect(driven.holds("trickle", body))
        #expect(driven.server.connections.count == 1)
        await driven.shutdown()
    }

    @Test func theStallIsNoticedWithinAQuarterSecondOfTheTimeout() async throws {
        let driven = try DrivenManager { $0.stallTimeout = .seconds(5) }
        let download = try driven.download("/sweep")
        driven.send(Array(head.utf8) + body[0..<1_000], on: try driven.nextRequest().connection)
        driven.advance(by: .milliseconds(4_900))
        #expect(download.stateCase == .receiving)
        driven.advance(by: .milliseconds(350))
        #expect(download.stateCase == .waitingToRetry)
        await driven.shutdown()
    }

    @Test func aPausedDownloadDoesNotStall() async throws {
        let driven = try DrivenManager { $0.stallTimeout = .seconds(5) }
        let download = try driven.download("/paused")
        driven.send(Array(head.utf8) + body[0..<1_000], on: try driven.nextRequest().connection)
        driven.pause(download)
        #expect(download.stateCase == .paused)
        driven.advance(by: .seconds(60))
        #expect(download.stateCase == .paused)
        #expect(driven.requests().isEmpty)
        await driven.shutdown()
    }
}
