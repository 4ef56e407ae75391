import FoundationEssentials
import Testing

@testable import Haul
@testable import HaulTestSupport

/// A caller's pause, resume and cancel, at each step of the path.
@Suite struct DrivenControlTests {
    let body = [UInt8].pattern(9_000, seed: 33)
    let head = "HTTP/1.1 200 OK\r\nETag: \"c\"\r\nContent-Length: 9000\r\n\r\n"

    @Test func aPauseKeepsTheBytesAndAResumeAsksForTheRest() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/pause")
        let first = try driven.nextRequest()
        driven.send(Array(head.utf8) + body[0..<4_000], on: first.connection)
        driven.pause(download)
        #expect(download.stateCase == .paused)
        #expect(download.progress.bytesReceived == 4_000)
        #expect(first.connection.nextRequest() == nil)
        #expect(driven.requests().isEmpty)
        driven.resume(download)
        let second = try driven.nextRequest()
        #expect(second.header("Range") == "bytes=4000-")
        #expect(second.header("If-Range") == "\"c\"")
        driven.answer(
            second,
            status: 206,
            [("ETag", "\"c\""), ("Content-Range", "bytes 4000-8999/9000")],
            body: Array(body[4_000...])
        )
        #expect(download.stateCase == .completed)
        #expect(driven.holds("pause", body))
        await driven.shutdown()
    }

    @Test func aPausedEventCarriesTheBytesKept() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/paused-event")
        var events = download.events.makeAsyncIterator()
        driven.send(Array(head.utf8) + body[0..<3_000], on: try driven.nextRequest().connection)
        driven.pause(download)
        driven.cancel(download)
        var pausedAt: Int64?
        while let event = await events.next() {
            if case .paused(let progress) = event { pausedAt = progress.bytesReceived }
        }
        #expect(pausedAt == 3_000)
        await driven.shutdown()
    }

    @Test func aCancelRemovesThePartialAndLeavesNoFile() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/cancel")
        driven.send(Array(head.utf8) + body[0..<4_000], on: try driven.nextRequest().connection)
        driven.cancel(download)
        #expect(download.stateCase == .cancelled)
        #expect(!driven.exists("cancel"))
        let state = driven.directory.appendingPathComponent("state")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: state.path)) ?? []
        #expect(!left.contains { $0.hasSuffix(".part") || $0.hasSuffix(".partial") })
        #expect(try #require(driven.manager.journalEntry(id: download.id)).state != .paused)
        await driven.shutdown()
    }

    @Test func aDownloadAskedForAgainAfterACancelStartsFromZero() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/again")
        driven.send(Array(head.utf8) + body[0..<4_000], on: try driven.nextRequest().connection)
        driven.cancel(download)
        let again = try driven.download("/again")
        let request = try driven.nextRequest()
        #expect(request.header("Range") == nil)
        driven.answer(request, [("ETag", "\"c\"")], body: body)
        #expect(again.stateCase == .completed)
        #expect(driven.holds("again", body))
        await driven.shutdown()
    }

    @Test func aPauseWhileWaitingToRetryHoldsTheRetry() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/hold")
        driven.answer(try driven.nextRequest(), status: 503)
        #expect(download.stateCase == .waitingToRetry)
        driven.pause(download)
        #expect(download.stateCase == .paused)
        driven.advance(by: .seconds(30))
        #expect(driven.requests().isEmpty)
        driven.resume(download)
        driven.answer(try driven.nextRequest(), body: body)
        #expect(download.stateCase == .completed)
        await driven.shutdown()
    }

    @Test func aQueuedDownloadPausedIsNotAdmittedUntilResumed() async throws {
        let driven = try DrivenManager { $0.maxConcurrentDownloads = 1 }
        let first = try driven.download("/first")
        let second = try driven.download("/second")
        let running = try driven.nextRequest()
        #expect(running.target == "/first")
        driven.pause(second)
        #expect(second.stateCase == .paused)
        driven.answer(running, body: body)
        #expect(first.stateCase == .completed)
        #expect(driven.requests().isEmpty)
        driven.resume(second)
        let request = try driven.nextRequest()
        #expect(request.target == "/second")
        driven.answer(request, body: body)
        #expect(second.stateCase == .completed)
        await driven.shutdown()
    }

    @Test func aQueuedDownloadCancelledNeverSendsARequest() async throws {
        let driven = try DrivenManager { $0.maxConcurrentDownloads = 1 }
        _ = try driven.download("/one")
        let two = try driven.download("/two")
        let running = try driven.nextRequest()
        driven.cancel(two)
        #expect(two.stateCase == .cancelled)
        driven.answer(running, body: body)
        #expect(driven.requests().isEmpty)
        #expect(!driven.exists("two"))
        await driven.shutdown()
    }

    @Test func aCancelAfterCompletionChangesNothing() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/done")
        driven.answer(try driven.nextRequest(), body: body)
        driven.cancel(download)
        #expect(download.stateCase == .completed)
        #expect(driven.holds("done", body))
        await driven.shutdown()
    }

    @Test func aRateLimitedDownloadWaitsForTheClock() async throws {
        let driven = try DrivenManager()
        let large = [UInt8].pattern(100_000, seed: 4)
        let download = try driven.download("/slow") { $0.maxBytesPerSecond = 20_000 }
        let request = try driven.nextRequest()
        driven.send(
            Array("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n".utf8) + large,
            on: request.connection
        )
        // The socket holds the body; the limiter lets about 20 KB a second through.
        #expect(download.stateCase == .receiving)
        var seconds = 0
        while download.stateCase != .completed && seconds < 20 {
            driven.advance(by: .seconds(1))
            seconds += 1
        }
        #expect(download.stateCase == .completed)
        #expect((3...7).contains(seconds), "\(seconds) s for 100 KB at 20 KB/s")
        #expect(driven.holds("slow", large))
        await driven.shutdown()
    }

    /// A sync sent for a download's partial file (a pause's, a checkpoint's) that reports after the
    /// download was cancelled describes a file that is gone: the row of the download asked for
    /// again claims no bytes durable (a restart after a power cut would trust them).
    @Test(arguments: [true, false])
    func aSyncReportedAfterACancelCountsForNothing(paused: Bool) async throws {
        let driven = try DrivenManager()
        let state = driven.directory.appendingPathComponent("state")
        let download = try driven.download("/late-sync")
        driven.send(Array(head.utf8) + body[0..<4_000], on: try driven.nextRequest().connection)
        let reactor = driven.manager.reactor
        // Sent, not awaited: the loop takes each in the turn the test runs next.
        let (pause, cancel): ((Download) -> Void, (Download) -> Void) = ({ $0.pause() }, { $0.cancel() })
        if paused {
            pause(download)  // its sync leaves for a disk lane at the end of the turn that takes it
        } else {
            driven.clock.advance(toUptime: driven.clock.uptimeNanoseconds + 6_000_000_000)  // a checkpoint
        }
        reactor.turn()
        cancel(download)  // taken before the lane's report, which comes through the inbox after it
        driven.run()
        #expect(download.stateCase == .cancelled)
        let again = try driven.download("/late-sync")
        let row = try #require(try driven.manager.journalRows(in: state)?[again.id.engine])
        #expect(row.bytesSynced == 0)
        await driven.shutdown()
    }

    /// A download whose file failed its checksum loses its partial file, and its row its bytes
    /// synced: asked for again, it claims no more durable than its new partial file's.
    @Test func aFailedChecksumLeavesNoBytesCalledDurable() async throws {
        let driven = try DrivenManager()
        let state = driven.directory.appendingPathComponent("state")
        let wrong = try #require(Checksum("sha256:" + String(repeating: "0", count: 64)))
        let download = try driven.download("/checked") { $0.checksum = wrong }
        let connection = try driven.nextRequest().connection
        driven.send(Array(head.utf8) + body[0..<4_000], on: connection)
        driven.advance(by: .seconds(6))  // a checkpoint: the 4,000 bytes synced and recorded
        let synced = try #require(try driven.manager.journalRows(in: state)?[download.id.engine])
        #expect(synced.bytesSynced == 4_000)
        driven.send(Array(body[4_000...]), on: connection)
        #expect(download.stateError?.code == .checksumMismatch)
        let again = try driven.download("/checked")
        let request = try driven.nextRequest()
        #expect(request.header("Range") == nil)
        driven.send(Array(head.utf8) + body[0..<1_000], on: request.connection)
        driven.pause(again)  // its 1,000 bytes written, recorded and synced
        let row = try #require(try driven.manager.journalRows(in: state)?[again.id.engine])
        #expect(row.bytesCommitted == 1_000)
        #expect(row.bytesSynced == 1_000)
        await driven.shutdown()
    }
}
