import FoundationEssentials
import Testing

@testable import Haul
@testable import HaulTestSupport

/// One download's path driven by hand (``DrivenManager``): the request it sends, each answer the
/// test writes, and what the caller sees after each step. No server runs: the test is the server.
@Suite struct DrivenDownloadTests {
    @Test func completesWithTheBytesTheServerSent() async throws {
        let driven = try DrivenManager()
        let body = [UInt8].pattern(10_000)
        let download = try driven.download("/a")
        let request = try driven.nextRequest()
        #expect(request.method == "GET")
        #expect(request.target == "/a")
        #expect(request.header("Host") == "files.test")
        #expect(request.header("Range") == nil)
        #expect(download.stateCase == .connecting)
        driven.answer(request, [("ETag", "\"v1\"")], body: body)
        #expect(download.stateCase == .completed)
        #expect(driven.holds("a", body))
        await driven.shutdown()
    }

    @Test func stepsFromConnectingToReceivingToCompleted() async throws {
        let driven = try DrivenManager()
        let body = [UInt8].pattern(4_000)
        let download = try driven.download("/steps")
        let request = try driven.nextRequest()
        #expect(download.stateCase == .connecting)
        driven.send(
            Array("HTTP/1.1 200 OK\r\nContent-Length: 4000\r\n\r\n".utf8) + body[0..<1_500],
            on: request.connection
        )
        #expect(download.stateCase == .receiving)
        #expect(download.progress.totalBytes == 4_000)
        #expect(!driven.exists("steps"))  // a destination appears only whole
        driven.send(Array(body[1_500...]), on: request.connection)
        #expect(download.stateCase == .completed)
        #expect(download.progress.bytesReceived == 4_000)
        #expect(driven.holds("steps", body))
        await driven.shutdown()
    }

    @Test func eventsArriveInTheOrderOfThePath() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/events")
        var events = download.events.makeAsyncIterator()
        driven.answer(try driven.nextRequest(), body: .pattern(2_000))
        #expect(download.state.isFinal)
        let names = await events.namesToTheEnd().filter { $0 != "progress" }
        #expect(names == ["queued", "connecting", "receiving", "completed"])
        await driven.shutdown()
    }

    @Test func writesAMegabyteBodyWhole() async throws {
        let driven = try DrivenManager()
        let body = [UInt8].pattern(1 << 20, seed: 7)
        let download = try driven.download("/big")
        driven.answer(try driven.nextRequest(), body: body)
        #expect(download.stateCase == .completed)
        #expect(driven.holds("big", body))
        await driven.shutdown()
    }

    @Test func anEmptyBodyIsAnEmptyFile() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/empty")
        driven.answer(try driven.nextRequest(), body: [])
        #expect(download.stateCase == .completed)
        #expect(driven.exists("empty"))
        #expect(driven.bytes(of: "empty").isEmpty)
        await driven.shutdown()
    }

    @Test func aBodyEndedByTheConnectionsCloseCompletes() async throws {
        let driven = try DrivenManager()
        let body = [UInt8].pattern(3_000)
        let download = try driven.download("/close")
        driven.answer(try driven.nextRequest(), [("Connection", "close")], body: body, length: -1, closing: true)
        #expect(download.stateCase == .completed)
        #expect(driven.holds("close", body))
        await driven.shutdown()
    }

    @Test func notFoundFailsAtOnceWithTheStatusAndNoFile() async throws {
        let driven = try DrivenManager()
        let download = try driven.download("/missing")
        driven.answer(try driven.nextRequest(), status: 404, body: Array("gone".utf8))
        #expect(download.stateCase == .failed)
        #expect(download.stateError?.httpStatus == 404)
        #expect(download.stateError?.url == "http://files.test/missing")
        #expect(!driven.exists("missing"))
        #expect(driven.requests().isEmpty)  // a 404 is not retried
        await driven.shutdown()
    }

    @Test func followsARedirectOnTheSameServer() async throws {
        let driven = try DrivenManager()
        let body = [UInt8].pattern(1_000)
        let download = try driven.download("/old", to: "moved")
        driven.answer(try driven.nextRequest(), status: 302, [("Location", "/new")])
        let second = try driven.nextRequest()
        #expect(second.target == "/new")
        driven.answer(second, body: body)
        #expect(download.stateCase == .completed)
        #expect(driven.holds("moved", body))
        await driven.shutdown()
    }

    @Test func stopsFollowingPastTheRedirectLimit() async throws {
        let driven = try DrivenManager { $0.maximumRedirects = 2 }
        let download = try driven.download("/r0", to: "loop")
        for hop in 1...3 {
            driven.answer(try driven.nextRequest(), status: 302, [("Location", "/r\(hop)")])
        }
        #expect(download.stateCase == .failed)
        #expect(driven.requests().isEmpty)
        #expect(!driven.exists("loop"))
        await driven.shutdown()
    }

    @Test func aBodyPastTheMaximumSizeFails() async throws {
        let driven = try DrivenManager { $0.maximumFileSize = 1_000 }
        let download = try driven.download("/huge")
        driven.answer(try driven.nextRequest(), body: .pattern(5_000))
        driven.expectFailed(download, .fileTooLarge, leavingNo: "huge")
        await driven.shutdown()
    }

    @Test func aChecksumThatMatchesCompletesAndOneThatDiffersFails() async throws {
        let driven = try DrivenManager()
        let body = Array("hello".utf8)
        let sha = Self.helloSHA
        let good = try driven.download("/good") { $0.checksum = Checksum(algorithm: .sha256, hex: sha) }
        driven.answer(try driven.nextRequest(), body: body)
        #expect(good.stateCase == .completed)
        let wrong = String(sha.reversed())
        let bad = try driven.download("/bad") { $0.checksum = Checksum(algorithm: .sha256, hex: wrong) }
        driven.answer(try driven.nextRequest(), body: body)
        driven.expectFailed(bad, .checksumMismatch, leavingNo: "bad")
        await driven.shutdown()
    }

    /// Two callers ask for one file while it downloads, one of them with a checksum its body does
    /// not have: whichever gave it, the file is checked against it (the running transfer takes the
    /// second's; a second without one does not take the first's away).
    @Test(arguments: [true, false])
    func aChecksumGivenByEitherCallerIsChecked(bySecond: Bool) async throws {
        let driven = try DrivenManager()
        let checksum = Checksum(algorithm: .sha256, hex: String(Self.helloSHA.reversed()))
        let first = try driven.download("/both") { if !bySecond { $0.checksum = checksum } }
        let request = try driven.nextRequest()
        let second = try driven.download("/both") { if bySecond { $0.checksum = checksum } }
        #expect(second.id == first.id)
        driven.answer(request, body: Array("hello".utf8))
        driven.expectFailed(first, .checksumMismatch, leavingNo: "both")
        await driven.shutdown()
    }

    @Test func anotherChecksumThanTheOneACallerWaitsForIsRefused() async throws {
        let driven = try DrivenManager()
        let first = try driven.download("/two-sums") { $0.checksum = Checksum(algorithm: .sha256, hex: Self.helloSHA) }
        let request = try driven.nextRequest()
        let refusal = #expect(throws: DownloadError.self) {
            try driven.download("/two-sums") { $0.checksum = Checksum(algorithm: .sha256, hex: Self.jelloSHA) }
        }
        #expect(refusal?.code == .destinationInUse)
        driven.answer(request, body: Array("hello".utf8))
        #expect(first.stateCase == .completed)
        #expect(driven.holds("two-sums", Array("hello".utf8)))
        await driven.shutdown()
    }

    @Test func aChecksumCorrectedWhileNoCallerWaitsReplacesTheOldOne() async throws {
        let driven = try DrivenManager()
        let queued = { (hex: String) in
            DownloadRequest(
                url: driven.url("/corrected"),
                destination: driven.file("corrected"),
                checksum: Checksum(algorithm: .sha256, hex: hex)
            )
        }
        _ = try driven.manager.enqueue([queued(Self.jelloSHA)])
        let request = try driven.nextRequest()
        _ = try driven.manager.enqueue([queued(Self.helloSHA)])  // the right one, while it runs
        driven.answer(request, body: Array("hello".utf8))
        #expect(driven.holds("corrected", Array("hello".utf8)))
        await driven.shutdown()
    }

    @Test func aChecksumAskedForWhileTheFileIsPlacedIsRefusedThenCheckedOnTheFile() async throws {
        let driven = try DrivenManager()
        let first = try driven.download("/placing")
        let request = try driven.nextRequest()
        // The whole answer, then the loop's turns one by one until the file is on its way to its
        // name (a disk lane has its finish job; the loop has not heard back).
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".utf8)
        #expect(request.connection.write(answer[...]) == answer.count)
        let reactor = driven.manager.reactor
        var turns = 0
        while reactor.delegate?.awaitsWorkOffLoop != true, turns < 1_000 {
            reactor.turn(waiting: true)
            turns += 1
        }
        try #require(reactor.delegate?.awaitsWorkOffLoop == true)
        let checksum = Checksum(algorithm: .sha256, hex: Self.jelloSHA)
        let refusal = #expect(throws: DownloadError.self) {
            try driven.download("/placing") { $0.checksum = checksum }
        }
        #expect(refusal?.code == .destinationInUse)
        driven.run()
        #expect(first.stateCase == .completed)
        #expect(driven.holds("placing", Array("hello".utf8)))
        // Asked again once placed: the file is checked, found to be another, and fetched anew.
        let again = try driven.download("/placing") { $0.checksum = checksum }
        driven.answer(try driven.nextRequest(), body: Array("jello".utf8))
        #expect(again.stateCase == .completed)
        #expect(driven.holds("placing", Array("jello".utf8)))
        await driven.shutdown()
    }

    @Test func aCompletedFileAskedForWithAnotherSizeIsFetchedAnewAndChecked() async throws {
        let driven = try DrivenManager()
        let first = try driven.download("/sized")
        driven.answer(try driven.nextRequest(), body: Array("hello".utf8))
        #expect(first.stateCase == .completed)
        // Asked again expecting 6 bytes: the file there has 5, so it is not the one asked for.
        let again = try driven.download("/sized") { $0.expectedSize = 6 }
        let request = try driven.nextRequest()
        driven.answer(request, body: Array("hello!".utf8))
        #expect(again.stateCase == .completed)
        let holds = driven.holds("sized", Array("hello!".utf8))
        #expect(holds)
        await driven.shutdown()
    }

    /// SHA-256 of "hello".
    static let helloSHA = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    /// SHA-256 of "jello".
    static let jelloSHA = "187c9bceeb919e1b3e6d20fa50ecabf7d9d50b5343e8f9a3d912abb13929102e"

    @Test func sendsTheRequestsHeadersAndUserAgent() async throws {
        let driven = try DrivenManager { $0.userAgent = "driven/1" }
        _ = try driven.download("/h") { $0.headers = [DownloadHeader("X-Token", "abc")] }
        let request = try driven.nextRequest()
        #expect(request.header("User-Agent") == "driven/1")
        #expect(request.header("X-Token") == "abc")
        await driven.shutdown()
    }

    @Test func theSameDestinationTwiceIsOneDownload() async throws {
        let driven = try DrivenManager()
        let first = try driven.download("/same")
        let second = try driven.download("/same")
        #expect(first.id == second.id)
        let requests = driven.requests()
        #expect(requests.count == 1)
        driven.answer(try #require(requests.first), body: .pattern(100))
        #expect(second.stateCase == .completed)
        await driven.shutdown()
    }

    @Test func aKeptAliveConnectionCarriesTheNextDownload() async throws {
        let driven = try DrivenManager()
        let first = try driven.download("/k1")
        driven.answer(try driven.nextRequest(), body: .pattern(100))
        #expect(first.stateCase == .completed)
        let second = try driven.download("/k2")
        let request = try driven.nextRequest()
        #expect(request.connection.number == 0)
        #expect(request.connection.requestCount == 2)
        driven.answer(request, body: .pattern(200))
        #expect(second.stateCase == .completed)
        #expect(driven.server.connections.count == 1)
        await driven.shutdown()
    }
}
