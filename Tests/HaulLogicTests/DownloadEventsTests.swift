import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulTransfer
@testable import HaulValues

@Suite("Download events and progress")
struct DownloadEventsTests {
    func progress(_ bytes: Int64) -> DownloadProgress {
        DownloadProgress(bytesReceived: bytes, totalBytes: 1000)
    }

    @Test func theFirstIterationGetsTheEarlierEventsLaterOnesTheCurrentState() async {
        let hub = EventHub(progress: progress(0).engine)
        let error = DownloadError(code: .httpStatus, url: "http://x/", httpStatus: 503)
        hub.publish(shown: .queued)
        hub.publish(shown: .connecting(progress(0)))
        hub.publish(shown: .waitingToRetry(error, after: .seconds(1)))
        hub.publish(shown: .connecting(progress(0)))
        hub.publish(shown: .receiving(progress(10)))
        hub.publish(shown: .progress(progress(15)))
        hub.publish(shown: .progress(progress(20)))
        // The first subscriber (typically whoever called download(…)) missed nothing but coalesced progress.
        var first = DownloadEvents(hub: hub).makeAsyncIterator()
        let expected: [DownloadEvent] = [
            .queued, .connecting(progress(0)), .waitingToRetry(error, after: .seconds(1)), .connecting(progress(0)),
            .receiving(progress(10)), .progress(progress(20)),
        ]
        for event in expected {
            #expect(await first.next() == event)
        }
        // Later ones start at the current state.
        var second = DownloadEvents(hub: hub).makeAsyncIterator()
        #expect(await second.next() == .receiving(progress(20)))
        hub.publish(shown: .paused(progress(30)))
        #expect(await first.next() == .paused(progress(30)))
        #expect(await second.next() == .paused(progress(30)))
        // A first subscriber after more events than a subscriber holds gets the newest ones.
        let busy = EventHub(progress: progress(0).engine)
        for round in 0..<100 { busy.publish(shown: .paused(progress(Int64(round)))) }
        var late = DownloadEvents(hub: busy).makeAsyncIterator()
        #expect(busy.bufferedCount(late.subscription.id) == EventHub.subscriberBufferLimit)
        #expect(await late.next() == .paused(progress(Int64(100 - EventHub.subscriberBufferLimit))))
        // With nothing published yet, the first subscriber starts at the current state, as any other.
        var fresh = DownloadEvents(hub: EventHub(progress: progress(0).engine)).makeAsyncIterator()
        #expect(await fresh.next() == .queued)
        // Past the early window, events are no longer kept for a first subscriber.
        let old = EventHub(progress: progress(0).engine, earlyWindow: 0)
        old.publish(shown: .connecting(progress(0)))
        old.publish(shown: .receiving(progress(5)))
        var after = DownloadEvents(hub: old).makeAsyncIterator()
        #expect(old.bufferedCount(after.subscription.id) == 1)
        #expect(await after.next() == .receiving(progress(5)))
    }

    @Test func progressIsCoalescedAndTheBufferIsBounded() async {
        let hub = EventHub(progress: progress(0).engine)
        var iterator = DownloadEvents(hub: hub).makeAsyncIterator()
        hub.publish(shown: .receiving(progress(0)))
        for bytes in 1...10_000 { hub.publish(shown: .progress(progress(Int64(bytes)))) }
        #expect(hub.bufferedCount(iterator.subscription.id) == 3)  // replay, receiving, newest progress
        for round in 0..<100 {
            hub.publish(shown: .paused(progress(Int64(round))))
            hub.publish(shown: .queued)
        }
        #expect(hub.bufferedCount(iterator.subscription.id) <= EventHub.subscriberBufferLimit)
        hub.publish(shown: .completed(URL(fileURLWithPath: "/tmp/x")))
        var last: DownloadEvent?
        var count = 0
        while let event = await iterator.next() {
            last = event
            count += 1
        }
        #expect(count <= EventHub.subscriberBufferLimit)
        #expect(last == .completed(URL(fileURLWithPath: "/tmp/x")))
    }

    @Test func everySubscriberGetsTheFinalEventAndTheResult() async throws {
        let hub = EventHub(progress: progress(0).engine)
        let file = URL(fileURLWithPath: "/tmp/file")
        let results = Task { try await hub.result() }
        let readers = (0..<5).map { _ in
            Task { () -> [DownloadEvent] in
                var events: [DownloadEvent] = []
                for await event in DownloadEvents(hub: hub) { events.append(event) }
                return events
            }
        }
        hub.publish(shown: .receiving(progress(1)))
        hub.publish(shown: .completed(file))
        for reader in readers {
            #expect(await reader.value.last == .completed(file))
        }
        #expect(try await results.value == file)
        // After the end: a late reader sees only the final event; a late waiter gets the result at once.
        var late = DownloadEvents(hub: hub).makeAsyncIterator()
        #expect(await late.next() == .completed(file))
        #expect(await late.next() == nil)
        #expect(try await hub.result() == file)
        // Nothing is published after the final event.
        hub.publish(shown: .paused(progress(3)))
        if case .completed = hub.snapshot.state {} else { Issue.record("state changed after the end") }
    }

    @Test func failureIsThrownByResult() async {
        let hub = EventHub(progress: progress(0).engine)
        let error = DownloadError(code: .httpStatus, url: "http://x/", httpStatus: 500)
        hub.publish(shown: .failed(error))
        await #expect(throws: error.engine) { try await hub.result() }
    }

    @Test func closeEndsSubscriptionsAndThrowsShutdown() async {
        let hub = EventHub(progress: progress(0).engine)
        var iterator = DownloadEvents(hub: hub).makeAsyncIterator()
        #expect(await iterator.next() == .queued)
        hub.publish(shown: .paused(progress(5)))
        hub.close(with: HaulValues.DownloadError(code: .shutdown, url: "http://x/"))
        #expect(await iterator.next() == .paused(progress(5)))
        #expect(await iterator.next() == nil)
        await #expect { try await hub.result() } throws: { ($0 as? HaulValues.DownloadError)?.code == .shutdown }
    }

    @Test func cancellingAWaitingReaderEndsItsIteration() async {
        let hub = EventHub(progress: progress(0).engine)
        let reader = Task { () -> Int in
            var count = 0
            for await _ in DownloadEvents(hub: hub) { count += 1 }
            return count
        }
        // The reader has read the replayed state and is waiting (or about to): cancel it.
        reader.cancel()
        let count = await reader.value
        #expect(count <= 1)
    }

    @Test func cancellingAResultWaiterThrowsCancellation() async {
        let hub = EventHub(progress: progress(0).engine)
        let waiter = Task { try await hub.result() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
    }
}

@Suite("Speed and time left")
struct SpeedMeterTests {
    @Test func rateOverTheWindow() {
        var meter = SpeedMeter()
        #expect(meter.bytesPerSecond == 0)
        meter.record(bytes: 0, at: 0)
        meter.record(bytes: 1_000_000, at: 1_000_000_000)
        #expect(meter.bytesPerSecond == 1_000_000)
        #expect(meter.estimatedTimeRemaining(received: 1_000_000, total: 3_000_000) == .seconds(2))
        #expect(meter.estimatedTimeRemaining(received: 1_000_000, total: nil) == nil)
    }

    @Test func oldSamplesLeaveTheWindow() {
        var meter = SpeedMeter()
        meter.record(bytes: 0, at: 0)
        meter.record(bytes: 10_000_000, at: 1_000_000_000)  // a fast first second
        for second in 2...10 {
            meter.record(bytes: 10_000_000 + Int64(second - 1) * 100_000, at: UInt64(second) * 1_000_000_000)
        }
        #expect(abs(meter.bytesPerSecond - 100_000) < 1)
    }

    @Test("fed every millisecond for a minute, a meter holds about ten samples and the right rate")
    func frequentSamplesAreMerged() {
        var meter = SpeedMeter()
        for millisecond in 0...60_000 {
            meter.record(bytes: Int64(millisecond) * 2_000, at: UInt64(millisecond) * 1_000_000)  // 2 MB/s
            #expect(meter.sampleCount <= 11)
        }
        #expect(abs(meter.bytesPerSecond - 2_000_000) < 1)
    }

    @Test func restartAndResetForgetTheRate() {
        var meter = SpeedMeter()
        meter.record(bytes: 0, at: 0)
        meter.record(bytes: 500, at: 1_000_000_000)
        meter.record(bytes: 10, at: 2_000_000_000)  // restarted from zero
        #expect(meter.bytesPerSecond == 0)
        meter.record(bytes: 110, at: 3_000_000_000)
        #expect(meter.bytesPerSecond == 100)
        meter.reset()
        #expect(meter.bytesPerSecond == 0)
    }
}

@Suite("Errors")
struct DownloadErrorTests {
    @Test func descriptionsNameTheURLTheCauseAndWhatToDo() {
        let notFound = DownloadError(code: .httpStatus, url: "http://host/a", httpStatus: 404)
        #expect(notFound.description.contains("http://host/a"))
        #expect(notFound.description.contains("404"))
        #expect(notFound.description.contains("Check the URL"))
        let refused = DownloadError(code: .transport, url: "http://host/a", curlCode: 7, detail: "Failed to connect")
        #expect(refused.description.contains("Failed to connect"))
        #expect(refused.description.contains("curl error 7"))
        #expect(refused.description.contains("Check that the server is up and reachable"))
        // The advice follows curl's cause.
        let advice: [(Int, String)] = [
            (6, "Check the host name"), (8, "not valid HTTP"), (28, "stallTimeout"), (35, "TLS handshake"),
            (47, "redirects in a loop"), (60, "certificateAuthorityFile"), (56, "Check the address and the network"),
            (27, "headers are larger than the 100 KB curl accepts"),
        ]
        for (code, text) in advice {
            let error = DownloadError(code: .transport, url: "http://host/a", curlCode: code)
            #expect(error.description.contains(text), "curl error \(code): \(error.description)")
            #expect(error.description.hasPrefix("Downloading http://host/a failed: "))
        }
        // curl's messages that echo a URL lose its user name and password.
        #expect(
            "Unsupported proxy syntax in 'http://u:pw@h:99999'".redactingURLCredentials
                == "Unsupported proxy syntax in 'http://h:99999'"
        )
        #expect("a http://u@h/x?q=a@b and https://x:y@z".redactingURLCredentials == "a http://h/x?q=a@b and https://z")
        #expect("no url, a@b".redactingURLCredentials == "no url, a@b")
        #expect("socks5h://u:p@w@h:1 end".redactingURLCredentials == "socks5h://h:1 end")
        // A program's words name the settings instead (haul's options; issue 38, item 7).
        let certificate = DownloadError(code: .transport, url: "http://host/a", curlCode: 60)
        let named = certificate.description(naming: { $0 == .certificateAuthorityFile ? "--ca-file" : "?" })
        #expect(named.contains("(--ca-file)") && !named.contains("certificateAuthorityFile"), "\(named)")
        #expect(
            DownloadError(code: .transport, url: "http://host/a", curlCode: 28).description(naming: { "«\($0)»" })
                .contains("raise «stallTimeout»")
        )
        let disk = DownloadError(code: .fileSystem, url: "http://host/a", errno: 28, path: "/full/x.part")
        #expect(disk.description.contains("/full/x.part"))
        #expect(disk.description.contains("No space left on device"))
        let scheme = DownloadError(code: .unsupportedScheme, url: "ftp://h/x", detail: "the scheme 'ftp'")
        #expect(scheme.description.contains("only http:// and https://"))
    }

    @Test("a failure's class and advice come from curl's code and where it failed, never from a message's words")
    func classesFromFactsNotWords() {
        // curl's words alone decide nothing: a timeout with a connect message but no stage is a stall.
        var timedOut = HaulValues.DownloadError(
            code: .transport,
            url: "http://h/a",
            curlCode: 28,
            detail: "Failed to connect to h port 80 after 3001 ms: Timeout was reached"
        )
        #expect(timedOut.category == .transfer)
        #expect(timedOut.description.contains("raise Configuration.stallTimeout"), "\(timedOut)")
        timedOut.stage = .connecting
        #expect(timedOut.category == .connection)
        #expect(timedOut.description.contains("raise Configuration.connectTimeout"), "\(timedOut)")
        // The proxy is named by the stage, whatever the message says.
        var refused = HaulValues.DownloadError(
            code: .transport,
            url: "http://h/a",
            curlCode: 7,
            detail: "the proxy says no"
        )
        #expect(refused.category == .connection && !refused.description.contains("Check that the proxy is up"))
        refused.stage = .connectingToProxy
        #expect(refused.description.contains("Check that the proxy is up"), "\(refused)")
        // A stall of a decoded body says why asking again from the start gets no further.
        var stalled = HaulValues.DownloadError(
            code: .transport,
            url: "http://h/a",
            curlCode: 28,
            detail: "no data arrived"
        )
        stalled.decodedFromStart = true
        #expect(!stalled.description.contains("Bodies are decoded"))
        stalled.stage = .stalled
        #expect(stalled.description.contains("Bodies are decoded"), "\(stalled)")
    }

    @Test func credentialsNeverAppear() throws {
        let url = try #require(URL(string: "https://user:secret@example.com/file?x=1"))
        #expect(!url.redactedString.contains("secret"))
        #expect(!url.redactedString.contains("user"))
        #expect(url.redactedString.contains("example.com/file?x=1"))
        #expect { try DownloadRequest.checkedURL(URL(string: "ftp://user:secret@example.com/f")!) } throws: { error in
            guard let error = error as? DownloadError else { return false }
            return error.code == .unsupportedScheme && !error.description.contains("secret")
        }
    }

    @Test func idsAreStableAndDistinct() {
        let a = HaulValues.DownloadID(destinationPath: "/tmp/a")
        #expect(a == HaulValues.DownloadID(destinationPath: "/tmp/a"))
        #expect(a != HaulValues.DownloadID(destinationPath: "/tmp/b"))
        #expect(a.rawValue.count == 32 && a.rawValue.allSatisfy(\.isHexDigit))
        // The first 128 bits of SHA-256("haul/1\n" + path): `printf 'haul/1\n/tmp/a' | sha256sum`.
        #expect(a.rawValue == "e569e2163383c241ed7db5fd68f3084a")
        // Non-ASCII paths are hashed as their UTF-8 bytes.
        #expect(
            HaulValues.DownloadID(destinationPath: "/tmp/données/é.bin").rawValue == "ef414af0fc65c15314047118b99c0ea4"
        )
        // The public form standardizes the destination, as the manager does.
        #expect(DownloadID(destination: URL(fileURLWithPath: "/tmp/x/../a")).engine == a)
        #expect(DownloadID(destination: URL(fileURLWithPath: "/tmp/./a")).engine == a)
        #expect(DownloadID(destination: URL(fileURLWithPath: "/tmp//a")).engine == a)
    }

    @Test("a request's id follows every change of what it is made of")
    func requestIDFollowsChanges() {
        let folder = URL(fileURLWithPath: "/tmp/folder", isDirectory: true)
        var request = DownloadRequest(
            url: URL(string: "https://example.com/a.bin")!,
            destination: URL(fileURLWithPath: "/tmp/a.bin")
        )
        #expect(request.id.engine == HaulValues.DownloadID(destinationPath: "/tmp/a.bin"))
        request.destination = URL(fileURLWithPath: "/tmp/b.bin")
        #expect(request.id.engine == HaulValues.DownloadID(destinationPath: "/tmp/b.bin"))
        request.destination.deleteLastPathComponent()
        request.destination.appendPathComponent("c.bin")
        #expect(request.id.engine == HaulValues.DownloadID(destinationPath: "/tmp/c.bin"))
        // The standardised path the id comes from follows the destination (the manager reuses it).
        #expect(request.destinationPath == "/tmp/c.bin")
        request.destination = URL(fileURLWithPath: "/tmp/sub/../d.bin")
        #expect(
            request.destinationPath == "/tmp/d.bin"
                && request.id.engine == HaulValues.DownloadID(destinationPath: "/tmp/d.bin")
        )
        request.destination = URL(fileURLWithPath: "/tmp/c.bin")
        // A download to a file is its file, whatever its URL.
        request.url = URL(string: "https://example.com/other.bin")!
        #expect(request.id.engine == HaulValues.DownloadID(destinationPath: "/tmp/c.bin"))
        request.destination = folder
        request.takesFileNameFromServer = true
        #expect(request.id == DownloadID(url: request.url, folder: folder))
        request.url = URL(string: "https://example.com/a.bin")!
        #expect(request.id == DownloadID(url: URL(string: "https://example.com/a.bin")!, folder: folder))
        request.key = "object-7"
        #expect(request.id == DownloadID(key: "object-7", folder: folder))
        #expect(request.destinationPath == "/tmp/folder")
        request.url = URL(string: "https://example.com/signed?sig=B")!
        #expect(request.id == DownloadID(key: "object-7", folder: folder))
        request.takesFileNameFromServer = false
        #expect(request.id.engine == HaulValues.DownloadID(destinationPath: "/tmp/folder"))
        request.takesFileNameFromServer = false  // unchanged: the same id
        #expect(request.id.engine == HaulValues.DownloadID(destinationPath: "/tmp/folder"))
        let byFolder = DownloadRequest(url: URL(string: "https://example.com/d.bin")!, folder: folder)
        #expect(byFolder.id == DownloadID(url: URL(string: "https://example.com/d.bin")!, folder: folder))
        // Equal requests have equal ids, and the id takes no part in equality of its own.
        #expect(byFolder == DownloadRequest(url: URL(string: "https://example.com/d.bin")!, folder: folder))
    }

    @Test("paths that need no standardizing are recognised, and only those")
    func plainPaths() {
        for path in ["/a", "/a/b", "/a/.hidden", "/a/...", "/a/b.c/d", "/x..y"] {
            #expect(FilePath.isPlainAbsolutePath(path), "\(path)")
        }
        for path in ["", "/", "a/b", "/a//b", "/a/./b", "/a/../b", "/a/b/", "/a/b/.", "/a/b/..", "/./a", "/../a"] {
            #expect(!FilePath.isPlainAbsolutePath(path), "\(path)")
        }
    }
}

extension EventHub {
    /// Publishes the event a caller is then shown (the hub keeps the layer's own).
    fileprivate func publish(shown event: DownloadEvent) { publish(event.engine) }
}
