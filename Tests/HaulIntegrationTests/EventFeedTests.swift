import Dispatch
import Foundation
import FoundationEssentials
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// The manager's feed, without a manager: what a reader that falls behind still gets.
struct EventFeedTests {
    static func event(_ index: Int, _ event: HaulIO.DownloadEvent) -> FeedEvent {
        FeedEvent(
            id: DownloadID(destination: URL(fileURLWithPath: "/tmp/feed/\(index)")).engine,
            destinationPath: "/tmp/feed/\(index)",
            event: event,
            download: nil
        )
    }

    /// The event as a reader of the feed gets it.
    static func read(_ index: Int, _ event: HaulIO.DownloadEvent) -> DownloadManagerEvent {
        DownloadManagerEvent(Self.event(index, event))
    }

    @Test("a reader far behind loses progress, never an outcome, and reads them in order")
    func outcomesAreNeverDropped() async {
        let feed = EventFeed()
        let subscription = EventFeed.Subscription(feed: feed)
        let count = 3 * EventFeed.subscriberBufferLimit
        let progress = HaulValues.DownloadProgress(bytesReceived: 1, totalBytes: 2)
        for index in 0..<count {
            feed.publish(Self.event(index, .progress(progress)))
            let outcome: HaulIO.DownloadEvent =
                index % 2 == 0 ? .completed(URL(fileURLWithPath: "/x")) : .failed(.init(code: .cancelled, url: nil))
            feed.publish(Self.event(index, outcome))
        }
        feed.close()
        var outcomes: [DownloadID] = []
        var progressEvents = 0
        var events = DownloadManagerEvents.AsyncIterator(subscription: subscription)
        while let event = await events.next() {
            if event.event.isFinal { outcomes.append(event.id) } else { progressEvents += 1 }
        }
        #expect(outcomes == (0..<count).map { DownloadID(Self.event($0, .queued).id) })
        #expect(progressEvents <= EventFeed.subscriberBufferLimit)
    }

    /// A subscriber of `feed` and the task that reads its events until the feed ends for it.
    static func reader(of feed: EventFeed) -> (EventFeed.Subscription, Task<[DownloadManagerEvent], Never>) {
        let subscription = EventFeed.Subscription(feed: feed)
        let reader = Task {
            var read: [DownloadManagerEvent] = []
            var events = DownloadManagerEvents.AsyncIterator(subscription: subscription)
            while let event = await events.next() { read.append(event) }
            return read
        }
        return (subscription, reader)
    }

    @Test("the loop's thread hands a waiting reader all its turn's events at once, in order, at the turn's end")
    func deferredWakeHandsOneBatch() async {
        let feed = EventFeed()
        let subscription = EventFeed.Subscription(feed: feed)
        let batches = Task { () -> [[DownloadManagerEvent]] in
            var batches: [[DownloadManagerEvent]] = []
            while true {
                let batch = await feed.nextBatch(subscription.id)
                if batch.isEmpty { return batches }
                batches.append(batch.map(DownloadManagerEvent.init))
            }
        }
        while !feed.isWaiting(subscription.id) { await Task.yield() }
        // A turn on a thread of its own, attached as the loop's (a pool thread would stay attached).
        let stillWaiting = await withCheckedContinuation { (turnEnded: CheckedContinuation<Bool, Never>) in
            Thread {
                feed.attachCurrentThread()
                for index in 0..<100 { feed.publish(Self.event(index, .queued)) }
                let waiting = feed.isWaiting(subscription.id)  // nobody woken inside the turn
                feed.wakeDeferred()  // the turn's end
                turnEnded.resume(returning: waiting)
            }.start()
        }
        #expect(stillWaiting)
        while !feed.isWaiting(subscription.id) { await Task.yield() }
        feed.publish(Self.event(100, .queued))  // outside: woken at once
        while !feed.isWaiting(subscription.id) { await Task.yield() }
        feed.close()
        #expect(await batches.value == [(0..<100).map { Self.read($0, .queued) }, [Self.read(100, .queued)]])
    }

    @Test("a cancelled reader still reads what was published before, woken or not, then ends")
    func cancelledReaderDrains() async {
        let feed = EventFeed()
        let (_, reader) = Self.reader(of: feed)  // the task keeps the subscription
        // Published as the loop thread does: buffered, the reader's wake-up left to the turn's end,
        // which never comes here.
        await Task.detached {
            feed.attachCurrentThread()
            for index in 0..<3 { feed.publish(Self.event(index, .queued)) }
        }.value
        reader.cancel()
        #expect(await reader.value == (0..<3).map { Self.read($0, .queued) })
    }

    @Test("events from the loop and from another thread reach a waiting reader in the order published")
    func orderAcrossThreads() async {
        let feed = EventFeed()
        let (subscription, reader) = Self.reader(of: feed)
        while !feed.isWaiting(subscription.id) { await Task.yield() }
        // The loop's event waits for the end of its turn; another thread's comes after it, and the
        // waiting reader gets the loop's first. The "loop" is a thread of its own, kept alive until
        // the end, so that no thread of this task's pool shares its identity.
        let published = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        Thread {
            feed.attachCurrentThread()
            feed.publish(Self.event(0, .queued))
            published.signal()
            release.wait()
        }.start()
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                published.wait()
                continuation.resume()
            }
        }
        feed.publish(Self.event(1, .queued))
        feed.close()
        release.signal()
        #expect(await reader.value == [Self.read(0, .queued), Self.read(1, .queued)])
    }

    @Test("equal events compare equal whatever handle carries them; the destination is the path's URL")
    func equality() {
        let a = Self.read(1, .queued)
        #expect(a == Self.read(1, .queued))
        #expect(a != Self.read(2, .queued))
        #expect(a.destination.path == "/tmp/feed/1")
    }
}

/// Following `enqueue`d downloads on the feed alone, as a caller with a long list does.
@Suite("enqueue followed on the manager's feed")
struct EnqueueFollowingTests {
    @Test(
        "every request's outcome arrives on the feed by its id, with its handle; a second run finds complete those that were"
    )
    func outcomesByID() async throws {
        let (server, directory) = try await startServerAndDirectory(inMemory: true)
        defer { stop(server, directory) }
        let source = try server.makeFile("f.bin", size: 20_000, seed: 5)
        let files = directory.appendingPathComponent("files")
        let count = 300
        let requests = (0..<count).map { index in
            DownloadRequest(url: server.url("f.bin"), destination: files.appendingPathComponent("\(index).bin"))
        }
        // The first run asks for some of them (runs of rows that exist and rows that do not, for the
        // second), the second for all.
        let firstRun = requests.indices.filter { $0 % 3 != 0 && $0 % 7 != 0 }
        for run in 0..<2 {
            var configuration = DownloadManager.Configuration()
            configuration.stateDirectory = directory.appendingPathComponent("state")
            configuration.maxConcurrentDownloads = 20
            let manager = try DownloadManager(configuration: configuration)
            var events = manager.events.makeAsyncIterator()
            let asked = run == 0 ? firstRun.map { requests[$0] } : requests
            let summary = try manager.enqueue(asked)
            #expect(summary.queued == (run == 0 ? firstRun.count : count - firstRun.count))
            #expect(summary.alreadyComplete == (run == 0 ? 0 : firstRun.count))
            let done = Set(firstRun.map { requests[$0].id })
            var pending = Set(asked.map(\.id))
            #expect(pending.count == asked.count)
            while !pending.isEmpty, let event = await events.next() {
                guard event.event.isFinal else { continue }
                guard case .completed(let file) = event.event else {
                    Issue.record("\(event.id) ended with \(event.event)")
                    break
                }
                #expect(pending.remove(event.id) != nil)
                #expect(event.download?.id == event.id)
                #expect(event.download?.wasAlreadyComplete == (run == 1 && done.contains(event.id)))
                #expect(try Data(contentsOf: file) == source)
            }
            #expect(pending.isEmpty)
            await manager.shutdown()
        }
    }

    @Test(
        "outcomes: only how each download ended (completed, 404, cancelled); events started beside it still get every state"
    )
    func outcomesOnly() async throws {
        try await withFaultServer { server, directory in
            var configuration = DownloadManager.Configuration()
            configuration.stateDirectory = directory.appendingPathComponent("state")
            configuration.maxConcurrentDownloads = 4
            configuration.retryLimit = 0
            let manager = try DownloadManager(configuration: configuration)
            var outcomes = manager.outcomes.makeAsyncIterator()
            // Outcomes only at first: the loop makes no other event for the feed.
            #expect(!manager.holdings.feedWantsEveryEvent)
            let first = (0..<6).map { index in
                DownloadRequest(
                    url: server.url(index == 5 ? "status/404" : "file/\(3000 + index)"),
                    destination: directory.appendingPathComponent("a\(index).bin")
                )
            }
            #expect(try manager.enqueue(first).queued == 6)
            var ended: [DownloadID: DownloadEvent] = [:]
            while ended.count < 6, let event = await outcomes.next() {
                #expect(event.event.isFinal, "\(event.event)")
                ended[event.id] = event.event
            }
            for (index, request) in first.enumerated() {
                switch ended[request.id] {
                case .completed(let file) where index < 5:
                    #expect(try Data(contentsOf: file) == FaultServer.body(size: 3000 + index))
                case .failed(let error) where index == 5: #expect(error.code == .httpStatus && error.httpStatus == 404)
                default: Issue.record("download \(index): \(String(describing: ended[request.id]))")
                }
            }
            // Then a reader of every event: both see the next download's outcome, only it its states.
            var events = manager.events.makeAsyncIterator()
            #expect(manager.holdings.feedWantsEveryEvent)
            let held = try manager.download(
                from: server.url("gate/1/8000"),
                to: directory.appendingPathComponent("b.bin")
            )
            var states: [String] = []
            while let event = await events.next() {
                guard event.id == held.id else { continue }
                switch event.event {
                case .queued: states.append("queued")
                case .connecting: states.append("connecting")
                case .receiving:
                    states.append("receiving")
                    _ = await held.cancel()
                case .cancelled: states.append("cancelled")
                default: break
                }
                if event.event.isFinal { break }
            }
            #expect(states == ["queued", "connecting", "receiving", "cancelled"], "\(states)")
            let outcome = await outcomes.next()
            #expect(outcome?.id == held.id)
            if case .cancelled = outcome?.event {} else { Issue.record("\(String(describing: outcome))") }
            server.openGate()
            await manager.shutdown()
        }
    }
}
