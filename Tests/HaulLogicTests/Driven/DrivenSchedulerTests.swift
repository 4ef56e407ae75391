import FoundationEssentials
import Testing

@testable import Haul
@testable import HaulTestSupport

/// Who runs, driven by hand: slots, hosts, priorities and the order of the queue, what frees a
/// slot, and a manager started again on the same state directory.
@Suite struct DrivenSchedulerTests {
    let body = [UInt8].pattern(2_000, seed: 44)

    @Test func noMoreRequestsThanSlotsAndAFreedSlotAdmitsTheNext() async throws {
        let driven = try DrivenManager { $0.maxConcurrentDownloads = 2 }
        let downloads = try (1...3).map { try driven.download("/s\($0)") }
        let requests = driven.requests()
        #expect(requests.map(\.target) == ["/s1", "/s2"])
        #expect(downloads[2].stateCase == .queued)
        driven.answer(requests[0], body: body)
        let next = driven.requests()
        #expect(next.map(\.target) == ["/s3"])
        for request in [requests[1]] + next { driven.answer(request, body: body) }
        #expect(downloads.allSatisfy { $0.stateCase == .completed })
        await driven.shutdown()
    }

    @Test func theHostLimitHoldsEachHostToItsShare() async throws {
        let driven = try DrivenManager { $0.maxConcurrentDownloadsPerHost = 1 }
        var other = DownloadRequest(url: URL(string: "http://other.test/o1")!, destination: driven.file("o1"))
        other.priority = 0
        _ = try driven.download("/f1")
        _ = try driven.download("/f2")
        _ = try driven.manager.download(other)
        let requests = driven.requests()
        #expect(Set(requests.compactMap { $0.header("Host") }) == ["files.test", "other.test"])
        #expect(requests.count == 2)
        let first = try #require(requests.first { $0.header("Host") == "files.test" })
        driven.answer(first, body: body)
        #expect(driven.requests().map(\.target) == [first.target == "/f1" ? "/f2" : "/f1"])
        await driven.shutdown()
    }

    @Test func theHighestPriorityWaitingGoesNext() async throws {
        let driven = try DrivenManager { $0.maxConcurrentDownloads = 1 }
        _ = try driven.download("/running")
        let running = try driven.nextRequest()
        _ = try driven.download("/low") { $0.priority = 0 }
        _ = try driven.download("/high") { $0.priority = 10 }
        _ = try driven.download("/middle") { $0.priority = 5 }
        var order: [String] = []
        var request = running
        for _ in 0..<3 {
            driven.answer(request, body: body)
            request = try driven.nextRequest()
            order.append(request.target)
        }
        #expect(order == ["/high", "/middle", "/low"])
        await driven.shutdown()
    }

    @Test func equalPrioritiesGoInTheOrderAskedFor() async throws {
        let driven = try DrivenManager { $0.maxConcurrentDownloads = 1 }
        for index in 0..<5 { _ = try driven.download("/q\(index)") }
        var order: [String] = []
        for _ in 0..<5 {
            let request = try driven.nextRequest()
            order.append(request.target)
            driven.answer(request, body: body)
        }
        #expect(order == (0..<5).map { "/q\($0)" })
        await driven.shutdown()
    }

    @Test func aFailureFreesItsSlotAtOnce() async throws {
        let driven = try DrivenManager { $0.maxConcurrentDownloads = 1 }
        let failing = try driven.download("/nope")
        let waiting = try driven.download("/yes")
        driven.answer(try driven.nextRequest(), status: 404)
        #expect(failing.stateCase == .failed)
        let next = try driven.nextRequest()
        #expect(next.target == "/yes")
        driven.answer(next, body: body)
        #expect(waiting.stateCase == .completed)
        await driven.shutdown()
    }

    @Test func aDownloadWaitingToRetryLeavesItsSlotToTheNext() async throws {
        let driven = try DrivenManager { $0.maxConcurrentDownloads = 1 }
        let retrying = try driven.download("/flaky")
        _ = try driven.download("/steady")
        driven.answer(try driven.nextRequest(), status: 503)
        #expect(retrying.stateCase == .waitingToRetry)
        let next = try driven.nextRequest()
        #expect(next.target == "/steady")
        driven.answer(next, body: body)
        driven.advancePastRetry(of: retrying)
        let again = try driven.nextRequest()
        #expect(again.target == "/flaky")
        driven.answer(again, body: body)
        #expect(retrying.stateCase == .completed)
        await driven.shutdown()
    }

    @Test func anEnqueuedRunStartsAsManyAsThereAreSlots() async throws {
        let driven = try DrivenManager { $0.maxConcurrentDownloads = 3 }
        let requests = (0..<8).map { DownloadRequest(url: driven.url("/e\($0)"), destination: driven.file("e\($0)")) }
        let summary = try driven.manager.enqueue(requests)
        #expect(summary.queued == 8)
        var answered = 0
        var inFlight = driven.requests()
        #expect(inFlight.count == 3)
        while !inFlight.isEmpty {
            #expect(inFlight.count <= 3)
            for request in inFlight { driven.answer(request, body: body) }
            answered += inFlight.count
            inFlight = driven.requests()
        }
        #expect(answered == 8)
        #expect((0..<8).allSatisfy { driven.holds("e\($0)", body) })
        await driven.shutdown()
    }

    @Test func aManagerStartedAgainResumesWhatTheLastOneLeft() async throws {
        let large = [UInt8].pattern(20_000, seed: 45)
        let first = try DrivenManager()
        let folder = first.directory
        let download = try first.download("/restart")
        let head = "HTTP/1.1 200 OK\r\nETag: \"r\"\r\nContent-Length: 20000\r\n\r\n"
        first.send(Array(head.utf8) + large[0..<12_000], on: try first.nextRequest().connection)
        let id = download.id
        await first.shutdown(keepingFiles: true)
        let second = try DrivenManager(in: folder)
        let request = try second.nextRequest()
        #expect(request.target == "/restart")
        #expect(request.header("Range") == "bytes=12000-")
        #expect(request.header("If-Range") == "\"r\"")
        second.answer(
            request,
            status: 206,
            [("ETag", "\"r\""), ("Content-Range", "bytes 12000-19999/20000")],
            body: Array(large[12_000...])
        )
        #expect(second.holds("restart", large))
        #expect(second.manager.journalEntry(id: id)?.state == .completed)
        await second.shutdown()
    }

    @Test func aQueuedRowOutlivesItsManager() async throws {
        let first = try DrivenManager { $0.maxConcurrentDownloads = 1 }
        _ = try first.download("/a1")
        _ = try first.download("/a2")
        let running = try first.nextRequest()
        first.answer(running, body: body)
        let folder = first.directory
        _ = try first.nextRequest()  // a2 went out; the manager stops before its answer
        await first.shutdown(keepingFiles: true)
        let second = try DrivenManager(in: folder)
        let request = try second.nextRequest()
        #expect(request.target == "/a2")
        second.answer(request, body: body)
        #expect(second.holds("a1", body))
        #expect(second.holds("a2", body))
        await second.shutdown()
    }

    @Test func theJournalListsACompletedDownloadWithItsBytes() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/listed")
        driven.answer(try driven.nextRequest(), body: body)
        let entry = try #require(driven.manager.journalEntry(id: download.id))
        #expect(entry.state == .completed)
        #expect(entry.bytesReceived == 2_000)
        #expect(entry.totalBytes == 2_000)
        #expect(entry.destination == driven.file("listed").path)
        await driven.shutdown()
    }
}
