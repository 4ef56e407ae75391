import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulScheduler
@testable import HaulTestSupport
@testable import HaulValues

/// The journal is the queue: queued downloads are rows, admitted by priority, then first in.
@Suite("The journal as the queue", .timeLimit(.minutes(2)))
struct QueueTests {
    func configuration(_ state: URL, concurrency: Int) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        configuration.maxConcurrentDownloads = concurrency
        return configuration
    }

    @Test("a bulk enqueue gets a larger page cache until it returns; short ones keep the small one")
    func bulkEnqueueCache() async throws {
        // Every answer holds after its head until the test ends (the fault server's gate), and no
        // stall timeout ends it while the test runs: the one download admitted (one slot) hangs
        // there, and no other runs while the rows go in, however long they take. (With the default
        // 30 s, a loaded machine's slow enqueue let the stall end it; a retrying download frees its
        // slot, and the next ones ran.)
        let server = FaultServer.shared()
        let directory = try makeTemporaryDirectory()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        let state = directory.appendingPathComponent("state")
        var held = configuration(state, concurrency: 1)
        held.stallTimeout = .seconds(3600)
        // The journal's own: bulk writes nest.
        let journal = try Journal(directory: state.path)
        #expect(journal.pageCacheKiB == 1024)
        journal.beginBulkWrite()
        journal.beginBulkWrite()
        #expect(journal.pageCacheKiB == 8192)
        journal.endBulkWrite()
        #expect(journal.pageCacheKiB == 8192)  // one still runs
        journal.endBulkWrite()
        #expect(journal.pageCacheKiB == 1024)
        journal.close()
        let manager = try DownloadManager(configuration: held)

        // Through enqueue: the first request of each run of 2,048 notes the cache's size as it is
        // taken, which is before the run ahead of it is written.
        var seen: [Int] = []
        func requests(_ range: Range<Int>) -> some Sequence<DownloadRequest> {
            range.lazy.map { index in
                if index % 2048 == 0 { seen.append(manager.pageCacheKiB(in: state) ?? 0) }
                return DownloadRequest(
                    url: server.url("gate/0/1000?download=\(index)"),
                    destination: directory.appendingPathComponent("out/\(index)")
                )
            }
        }
        #expect(try manager.enqueue(requests(0..<4096)).queued == 4096)
        #expect(seen == [1024, 1024])
        seen = []
        #expect(try manager.enqueue(requests(4096..<(4096 + 12 * 2048))).queued == 12 * 2048)
        // Runs 1–9 were taken before the 8th was written, with the small cache; runs 10–12 after.
        #expect(seen == Array(repeating: 1024, count: 9) + Array(repeating: 8192, count: 3))
        #expect(manager.pageCacheKiB(in: state) == 1024)
        // No other download ran meanwhile: every request (the first download's retries included) was
        // the first download's.
        #expect(Set(server.allRequests.map(\.path)).count <= 1, "\(Set(server.allRequests.map(\.path)))")
        await manager.shutdown()
    }

    @Test("2,000 enqueued downloads are rows, not objects; a new manager finishes what a shutdown left")
    func queuedDownloadsAreRows() async throws {
        let (server, directory) = try await startServerAndDirectory(inMemory: true)
        defer { stop(server, directory) }
        let source = try server.makeFile("q.bin", size: 8 * 1024, seed: 11)
        let state = directory.appendingPathComponent("state")
        let files = directory.appendingPathComponent("files")
        let count = 2_000
        let requests = (0..<count).lazy.map { index in
            DownloadRequest(url: server.url("q.bin"), destination: files.appendingPathComponent("\(index).bin"))
        }

        let first = try DownloadManager(configuration: configuration(state, concurrency: 2))
        // One handle, taken before the rest is queued so that the download cannot end unseen.
        let tracked = try first.download(from: server.url("q.bin"), to: files.appendingPathComponent("9.bin"))
        let summary = try first.enqueue(requests)
        #expect(summary.queued == count - 1)
        #expect(summary.alreadyQueued + summary.alreadyComplete == 1)
        #expect(summary.rejected.isEmpty)
        // Only admitted downloads have a handle or a transfer (two receiving, and at most the
        // finishing limit more whose bytes are all in, waiting on the disk: twice the slots);
        // every request is a row.
        let finishing = MemoryBudget.finishingLimit(slots: 2, openPartialFiles: .max)
        #expect(finishing == 4)
        let holdings = first.holdings
        #expect(holdings.transfers <= 2 + finishing)
        #expect(holdings.handles <= 2 + finishing + 1)  // and one held here
        #expect(try first.journalRows(in: state)?.count == count)
        // Re-attaching by id gives the same handle.
        #expect(
            first.download(id: DownloadID(destination: files.appendingPathComponent("9.bin")))
                === tracked
                || tracked.state.isFinal
        )
        #expect(try await tracked.finished() == files.appendingPathComponent("9.bin"))
        await first.shutdown()

        let afterShutdown = try Journal(directory: state.path)
        let records = try afterShutdown.allRecords().map(\.1)
        afterShutdown.close()
        let done = records.filter { $0.state == .completed }.count
        #expect(records.count == count)
        #expect(done >= 1)
        #expect(done < count, "the shutdown came long before 2,000 transfers could end")
        #expect(records.allSatisfy { $0.state == .completed || $0.state == .interrupted })

        let second = try DownloadManager(configuration: configuration(state, concurrency: 8))
        // Handles only for what it admitted: eight receiving and those waiting on the disk.
        #expect(
            second.holdings.handles
                <= 8 + MemoryBudget.finishingLimit(slots: 8, openPartialFiles: .max)
        )
        await second.waitUntilIdle()
        #expect(second.holdings.transfers == 0)
        await second.shutdown()

        for index in 0..<count {
            #expect(try Data(contentsOf: files.appendingPathComponent("\(index).bin")) == source)
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasSuffix(".part") }
        #expect(leftovers.isEmpty)
        let final = try Journal(directory: state.path)
        #expect(try final.allRecords().allSatisfy { $0.1.state == .completed })
        final.close()
        // Each file was sent once, except those a shutdown interrupted (at most the two in flight).
        let sent = server.accessLog().filter { $0.uri == "/q.bin" }.count
        #expect(sent >= count && sent <= count + 2)
    }

    @Test("higher priority first, then first in; bad requests are rejected one by one")
    func priorityThenOrder() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        for name in ["a", "b", "c", "d"] { try server.makeFile("\(name).bin", size: 1000) }
        let state = directory.appendingPathComponent("state")
        try await withDownloadManager(configuration: configuration(state, concurrency: 1)) { manager in
            func request(_ name: String, _ priority: Int = 0) -> DownloadRequest {
                DownloadRequest(
                    url: server.url("\(name).bin"),
                    destination: directory.appendingPathComponent("\(name).bin"),
                    priority: priority
                )
            }
            let summary = try manager.enqueue([
                request("a"), request("b"),
                DownloadRequest(
                    url: URL(string: "ftp://127.0.0.1/x")!,
                    destination: directory.appendingPathComponent("x")
                ),
                request("c"),
                DownloadRequest(url: server.url("a.bin"), destination: directory),
                request("d", 5),
            ])
            #expect(summary.queued == 4)
            #expect(summary.rejected.map(\.index) == [2, 4])
            #expect(summary.rejected.map(\.error.code) == [.unsupportedScheme, .fileSystem])
            #expect(
                summary.rejected.map(\.request.url.absoluteString) == [
                    "ftp://127.0.0.1/x", server.url("a.bin").absoluteString,
                ]
            )
            #expect(
                summary.rejected.map(\.request.destination.path) == [
                    directory.appendingPathComponent("x").path, directory.path,
                ]
            )
            await manager.waitUntilIdle()
            #expect(
                server.accessLog().map(\.uri).filter { $0.hasSuffix(".bin") } == [
                    "/d.bin", "/a.bin", "/b.bin", "/c.bin",
                ]
            )

            let again = try manager.enqueue([request("a"), request("b", 3)])
            #expect(again.alreadyComplete == 2)
            #expect(again.queued == 0)
        }
        for name in ["a", "b", "c", "d"] {
            #expect(try Data(contentsOf: directory.appendingPathComponent("\(name).bin")).count == 1000)
        }
    }

    @Test("across journals, the highest priority first: each journal's queue is read, the best head taken")
    func priorityAcrossJournals() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        // 1 MiB at once, then 1 KB/s: it holds the one slot while the others are queued.
        try server.makeFile("blocker.bin", size: 1024 * 1024 + 256 * 1024)
        let names = ["a1", "a2", "b", "c", "d", "top"]
        for name in names { try server.makeFile("\(name).bin", size: 1000) }
        var configuration = DownloadManager.Configuration()  // a journal beside each folder
        configuration.maxConcurrentDownloads = 1
        try await withDownloadManager(configuration: configuration) { manager in
            let blocker = try manager.download(
                from: server.url("gated/blocker.bin"),
                to: directory.appendingPathComponent("blocker/blocker.bin")
            )
            for await event in blocker.events {
                if case .receiving = event { break }
            }
            // Five folders, five journals; the one row of priority 5 is queued last, in its own.
            func request(_ name: String, priority: Int = 0) -> DownloadRequest {
                DownloadRequest(
                    url: server.url("\(name).bin"),
                    destination: directory.appendingPathComponent("\(name.prefix(1))/\(name).bin"),
                    priority: priority
                )
            }
            #expect(try manager.enqueue([request("a1"), request("a2")]).queued == 2)
            #expect(try manager.enqueue([request("b"), request("c"), request("d")]).queued == 3)
            #expect(try manager.enqueue([request("top", priority: 5)]).queued == 1)
            await blocker.pause()  // its slot frees: the next download is the best of five journals' heads
            await manager.waitUntilIdle()
        }
        let order = server.accessLog().map(\.uri).filter { $0.hasSuffix(".bin") && !$0.contains("blocker") }
        #expect(order.sorted() == names.map { "/\($0).bin" })
        #expect(order.first == "/top.bin", "\(order)")
        #expect((order.firstIndex(of: "/a1.bin") ?? 6) < (order.firstIndex(of: "/a2.bin") ?? 0), "\(order)")
        for name in names {
            let file = directory.appendingPathComponent("\(name.prefix(1))/\(name).bin")
            #expect(try Data(contentsOf: file).count == 1000)
        }
    }

    @Test("a queued download can be paused and cancelled before it runs, and resumed later")
    func controlsOfQueuedDownloads() async throws {
        try await withFaultServer { server, directory in
            let state = directory.appendingPathComponent("state")
            try await withDownloadManager(configuration: configuration(state, concurrency: 1)) { manager in
                // 8 MiB dripped at 80 KB/s: it holds the only slot for as long as the test needs.
                let running = try manager.download(
                    from: server.url("drip/8192/100/8388608"),
                    to: directory.appendingPathComponent("big")
                )
                var runningEvents = running.events.makeAsyncIterator()
                await runningEvents.next { if case .receiving = $0 { true } else { false } }
                let waiting = try manager.download(
                    from: server.url("file/50000"),
                    to: directory.appendingPathComponent("small")
                )
                let doomed = try manager.download(
                    from: server.url("file/50001"),
                    to: directory.appendingPathComponent("gone")
                )
                #expect(waiting.state == .queued)
                await waiting.pause()
                await doomed.cancel()
                var waitingEvents = waiting.events.makeAsyncIterator()
                #expect(
                    await waitingEvents.next { if case .paused = $0 { true } else { false } }
                        == .paused(waiting.progress)
                )
                await #expect { try await doomed.finished() } throws: { ($0 as? DownloadError)?.code == .cancelled }

                // The slot frees; nothing queued is left to take it: paused stays paused, cancelled stays
                // cancelled (its row says so, for listings).
                await running.pause()
                await runningEvents.next { if case .paused = $0 { true } else { false } }
                await manager.waitUntilIdle()
                #expect(waiting.state == .paused)
                let rows = try #require(try manager.journalRows(in: state))
                #expect(rows[waiting.id.engine]?.state == .paused)
                #expect(rows[doomed.id.engine]?.state == .cancelled)
                #expect(server.requests(to: "/file/50000").isEmpty && server.requests(to: "/file/50001").isEmpty)

                await waiting.resume()
                #expect(try await waiting.finished() == directory.appendingPathComponent("small"))
                await running.cancel()
                await #expect { try await running.finished() } throws: { ($0 as? DownloadError)?.code == .cancelled }
            }
            #expect(try Data(contentsOf: directory.appendingPathComponent("small")) == FaultServer.body(size: 50000))
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("gone").path))
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("big").path))
        }
    }

    @Test("a per-host limit spans downloads; the queue goes on with other hosts meanwhile")
    func perHostLimit() async throws {
        // Two servers on two ports: two hosts, with one clock for their requests' arrivals.
        let slowHost = try FaultServer.start()
        let fastHost = try FaultServer.start()
        let directory = try makeTemporaryDirectory()
        defer {
            slowHost.stop()
            fastHost.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        var configuration = configuration(directory.appendingPathComponent("state"), concurrency: 4)
        configuration.maxConcurrentDownloadsPerHost = 1
        try await withDownloadManager(configuration: configuration) { manager in
            // Six slow downloads from one host first (each about 0.25 s), then three from another.
            var downloads = try (0..<6).map { index in
                try manager.download(
                    from: slowHost.url("drip/4096/50/20480?\(index)"),
                    to: directory.appendingPathComponent("slow\(index)")
                )
            }
            downloads += try (0..<3).map { index in
                try manager.download(
                    from: fastHost.url("file/20000?\(index)"),
                    to: directory.appendingPathComponent("fast\(index)")
                )
            }
            for download in downloads { _ = try await download.finished() }
        }
        let slow = slowHost.allRequests.map(\.arrival)
        let fast = fastHost.allRequests.map(\.arrival)
        #expect(slow.count == 6 && fast.count == 3)
        // One at a time from the limited host: each response drips for about 0.2 s before the next request.
        for (earlier, later) in zip(slow, slow.dropFirst()) {
            #expect(later - earlier >= .milliseconds(150), "\(later - earlier)")
        }
        // The other host was not held behind the six: its requests came before the last of them.
        if let last = slow.last { #expect(fast.allSatisfy { $0 < last }) }
        for index in 0..<6 {
            #expect(
                try Data(contentsOf: directory.appendingPathComponent("slow\(index)")) == FaultServer.body(size: 20480)
            )
        }
        for index in 0..<3 {
            #expect(
                try Data(contentsOf: directory.appendingPathComponent("fast\(index)")) == FaultServer.body(size: 20000)
            )
        }
    }

    @Test("load: 2,000 downloads at once through the public API, all byte-identical")
    func twoThousandAtOnce() async throws {
        let (server, directory) = try await startServerAndDirectory(inMemory: true)
        defer { stop(server, directory) }
        let count = 2_000
        // 40 sources at 24 KiB, served at 256 KB/s each: every transfer lasts long enough that all
        // 2,000 are live together.
        let sources = try (0..<40).map {
            try server.makeFile("load/\($0).bin", size: 24 * 1024, seed: UInt64(100 + $0))
        }
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.maxConcurrentDownloads = count
        configuration.bufferSize = 16 * 1024
        configuration.checkpointInterval = .seconds(60)
        let files = directory.appendingPathComponent("files")
        let manager = try DownloadManager(configuration: configuration)
        do {
            let downloads = try (0..<count).map { index in
                try manager.download(
                    from: server.url("slowest/load/\(index % 40).bin?\(index)"),
                    to: files.appendingPathComponent("\(index).bin")
                )
            }
            let results = try await withThrowingTaskGroup(of: URL.self) { group in
                for download in downloads { group.addTask { try await download.finished() } }
                var results: [URL] = []
                for try await url in group { results.append(url) }
                return results
            }
            #expect(results.count == count)
        }
        await manager.shutdown()
        #expect(manager.holdings.transfers == 0)
        for index in 0..<count {
            #expect(
                try Data(contentsOf: files.appendingPathComponent("\(index).bin")) == sources[index % 40],
                "\(index)"
            )
        }
        // Each file was sent once.
        #expect(server.accessLog().filter { $0.uri.hasPrefix("/slowest/load/") }.count == count)
    }
}

@Suite("The manager's events")
struct ManagerEventsTests {
    @Test("one stream for every download: enqueued ones (no handle) queued, then their outcome; it ends at shutdown")
    func oneStream() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("e.bin", size: 50_000, seed: 48)
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.maxConcurrentDownloads = 3
        let manager = try DownloadManager(configuration: configuration)
        // Subscribed before anything starts; read after the shutdown (its buffer holds 4,096 events,
        // far more than these downloads publish).
        var iterator = manager.events.makeAsyncIterator()
        let requests = (0..<20).map {
            DownloadRequest(url: server.url("e.bin?\($0)"), destination: directory.appendingPathComponent("e\($0).bin"))
        }
        let missing = try manager.download(from: server.url("missing.bin"), to: directory.appendingPathComponent("m"))
        let summary = try manager.enqueue(requests)
        #expect(summary.queued == 20)
        await manager.waitUntilIdle()
        #expect(throws: DownloadError.self) { try missing.finishedSynchronouslyForTest() }
        await manager.shutdown()
        var seen: [DownloadManagerEvent] = []
        while let event = await iterator.next() { seen.append(event) }
        for request in requests {
            let id = DownloadID(destination: request.destination)
            let mine = seen.filter { $0.id == id }.map(\.event)
            #expect(mine.first == .queued, "\(mine)")
            #expect(mine.last == .completed(request.destination), "\(mine)")
            #expect(mine.contains { if case .connecting = $0 { true } else { false } })
            #expect(try Data(contentsOf: request.destination) == source)
        }
        let failed = seen.filter { $0.id == missing.id }.map(\.event).last
        guard case .failed(let error)? = failed else {
            Issue.record("the failed download's outcome is missing: \(String(describing: failed))")
            return
        }
        #expect(error.httpStatus == 404)
    }
}

extension Download {
    /// The outcome of a download that has ended (for tests that waited for the manager to be idle).
    fileprivate func finishedSynchronouslyForTest() throws {
        if case .failed(let error) = state { throw error }
    }
}
