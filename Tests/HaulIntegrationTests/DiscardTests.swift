import Foundation
import MetricsTestKit
import Synchronization
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 42, items 3 and 6: a body read, counted and thrown away (a load test's), every download's
/// timings, and streams and discarded bodies under the same slots, limits and metrics as files.
@Suite("Discarded bodies", .timeLimit(.minutes(2)))
struct DiscardTests {
    @Test("a discarded body is counted, never written; its timings say what it cost; one URL twice is two downloads")
    func discardsAndTimes() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 1024 * 1024 + 3
        _ = try server.makeFile("counted.bin", size: size, seed: 31)
        var configuration = DownloadManager.Configuration.forTests()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        try await withDownloadManager(configuration: configuration) { manager in
            let first = try manager.discard(from: server.url("counted.bin"))
            // Its row is this manager's, in memory, beside no state directory and no partial file
            // (the configured state directory is for files).
            #expect(first.stateDirectory == nil)
            #expect(try await first.finished().path == "/dev/null")
            // The same URL again: its own download, over the connection the first left open.
            let second = try manager.discard(from: server.url("counted.bin"))
            #expect(second.id != first.id)
            #expect(DownloadRequest.discarding(server.url("a")) != DownloadRequest.discarding(server.url("a")))
            // Each its own id (random, 32 hexadecimal digits); a copy of one request is that request.
            let requests = (0..<1000).map { _ in DownloadRequest.discarding(server.url("a")) }
            #expect(Set(requests.map(\.id)).count == 1000 && Set(requests).count == 1000)
            #expect(requests.allSatisfy { $0.id.rawValue.count == 32 && $0.id.rawValue.allSatisfy(\.isHexDigit) })
            #expect(requests.allSatisfy { $0.id.rawValue == $0.id.rawValue.lowercased() })
            let copy = requests[0]
            #expect(copy == requests[0] && copy.id == requests[0].id)
            _ = try await second.finished()
            for download in [first, second] {
                let timings = download.timings
                #expect(timings.bytes == Int64(size) && download.progress.bytesReceived == Int64(size))
                #expect(timings.attempts == 1)
                let (firstByte, total) = (try #require(timings.timeToFirstByte), try #require(timings.total))
                #expect(firstByte > .zero && firstByte <= total, "\(timings)")
                #expect(timings.queued != nil)
            }
            // Its response, without the headers a discarded body does not pay to keep.
            #expect(first.response?.status == 200 && first.response?.totalBytes == Int64(size))
            #expect(first.response?.headers.isEmpty == true)
            #expect(first.timings.connectionsOpened == 1 && first.timings.connectionsReused == 0)
            #expect(second.timings.connectionsOpened == 0 && second.timings.connectionsReused == 1)
            // Two at once, from one URL: two downloads, each whole.
            let both = [
                try manager.discard(from: server.url("counted.bin")),
                try manager.discard(from: server.url("counted.bin")),
            ]
            for download in both { _ = try await download.finished() }
            #expect(both.allSatisfy { $0.timings.bytes == Int64(size) })
            // Nothing of them is left: no row, no partial, no file.
            #expect(([first, second] + both).allSatisfy { manager.journalEntry(id: $0.id) == nil })
        }
        let state = try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("state").path)
        #expect(state.allSatisfy { $0.hasPrefix("journal") || $0.hasPrefix("owner-") }, "\(state)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["state"])
        #expect(server.accessLog().filter { $0.uri == "/counted.bin" }.count == 4)
    }

    @Test("a discarded body through a connection dropped every 100 KB: resumed from the byte after the last counted")
    func resumesAfterDrops() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: FaultTests().patient(directory)) { manager in
                let download = try manager.discard(from: server.url("drop/100000/400000"))
                _ = try await download.finished()
                #expect(download.timings.bytes == 400_000 && download.timings.attempts == 4)
                #expect(download.timings.connectionsOpened == 4)  // each drop closed its connection
            }
            let requests = server.requests(to: "/drop/100000/400000")
            #expect(requests.map(\.range) == [nil, "bytes=100000-", "bytes=200000-", "bytes=300000-"])
            #expect(requests.dropFirst().allSatisfy { $0.ifRange == "\"v1-400000\"" })
        }
    }

    @Test("a server that ignores Range after a drop: a discarded body counts again from zero (nothing was kept)")
    func restartsTheCount() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: FaultTests().patient(directory)) { manager in
                let download = try manager.discard(from: server.url("norange-drop/100000/400000"))
                var restarted = false
                for await event in download.events {
                    if case .restarted(.rangeIgnored) = event { restarted = true }
                }
                #expect(try await download.finished().path == "/dev/null")
                #expect(restarted)
                #expect(download.progress.bytesReceived == 400_000)
                // Every request the server saw is an attempt (the second learnt that the host ignores
                // an ETag If-Range, the third was answered whole); each on a connection of its own.
                let requests = server.requests(to: "/norange-drop/100000/400000")
                #expect(requests.last?.status == 200 && requests.count >= 2)
                #expect(download.timings.attempts == requests.count)
                #expect(download.timings.connectionsOpened == requests.count)
                // Counted: the 100,000 bytes before the drop, then the whole body again.
                #expect(download.timings.bytes == 500_000)
            }
        }
    }

    @Test("rate-limited, the chunk that crosses the maximum comes back from the limiter, refused: the download fails")
    func limitedBodyAgainstTheLimit() async throws {
        try await withFaultServer { server, directory in
            var configuration = FaultTests().patient(directory)
            // Past its first bucket, nearly every chunk waits for the limiter, which gives it back to
            // curl (`curl_easy_pause`): the one that crosses the maximum is refused there, and curl
            // reports that as the unpause's error; the transfer ends the request with it.
            configuration.rateLimits = RateLimits(total: 2 * 1024 * 1024)
            try await withDownloadManager(configuration: configuration) { manager in
                await #expect {
                    _ = try await manager.data(from: server.url("endless"), maximumSize: 1024 * 1024)
                } throws: { error in
                    (error as? DownloadError)?.code == .fileTooLarge
                }
                await manager.waitUntilIdle()
            }
        }
    }

    @Test("a body that never ends, into memory: fails at the maximum, and its transfer stops there")
    func endlessBodyAgainstTheLimit() async throws {
        try await withFaultServer { server, directory in
            let metrics = TestMetrics()
            var configuration = FaultTests().patient(directory)
            configuration.metricsFactory = metrics
            try await withDownloadManager(configuration: configuration) { manager in
                await #expect {
                    _ = try await manager.data(from: server.url("endless"), maximumSize: 1024 * 1024)
                } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .fileTooLarge && error.description.contains("1048576")
                }
                await manager.waitUntilIdle()
            }
            // Nothing past the limit was taken (the chunk that crosses it is refused): far from 1 GiB.
            let received = try metrics.expectCounter("haul_received_bytes_total").totalValue
            #expect(received <= 1024 * 1024 && received > 900_000, "\(received)")
            #expect(try metrics.expectCounter("haul_downloads_started_total").totalValue == 1)
            #expect(metrics.counters(label: "haul_downloads_completed_total").allSatisfy { $0.totalValue == 0 })
        }
    }
}

/// Streams and discarded bodies take the same slots, per-host limits, rate limits and metrics as files.
extension DiscardTests {
    enum Limit: String, CaseIterable, Sendable { case slots, perHost }

    @Test(
        "one slot (or one per host): a discarded body, a stream and a file go one after another",
        arguments: Limit.allCases
    )
    func sharedSlots(limit: Limit) async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("first.bin", size: 300 * 1024, seed: 32)
        let streamed = try server.makeFile("second.bin", size: 100 * 1024, seed: 33)
        let filed = try server.makeFile("third.bin", size: 100 * 1024, seed: 34)
        var configuration = DownloadManager.Configuration.forTests()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        switch limit {
        case .slots: configuration.maxConcurrentDownloads = 1
        case .perHost: configuration.maxConcurrentDownloadsPerHost = 1
        }
        try await withDownloadManager(configuration: configuration) { manager in
            var feed = manager.events.makeAsyncIterator()
            // The first is slow (512 KB/s): the others wait for its slot.
            let discarded = try manager.discard(from: server.url("slow/first.bin"))
            let stream = try manager.stream(from: server.url("second.bin"))
            let file = try manager.download(
                from: server.url("third.bin"),
                to: directory.appendingPathComponent("third.bin")
            )
            async let body = DownloadStreamTests.collect(stream)
            var order: [String] = []
            let names = [discarded.id: "discarded", stream.download.id: "stream", file.id: "file"]
            var ended = 0
            while ended < 3, let event = await feed.next() {
                guard let name = names[event.id] else { continue }
                switch event.event {
                case .connecting: order.append("\(name) connecting")
                case .completed: order.append("\(name) completed")
                default: break
                }
                if event.event.isFinal { ended += 1 }
            }
            #expect(try await body == streamed)
            #expect(try Data(contentsOf: try await file.finished()) == filed)
            // Only the first request of each (a connecting event per request).
            var seen = Set<String>()
            let firsts = order.filter { seen.insert($0).inserted }
            #expect(
                firsts == [
                    "discarded connecting", "discarded completed", "stream connecting", "stream completed",
                    "file connecting", "file completed",
                ]
            )
        }
    }

    @Test("a stream and a discarded body share the manager's rate limit, and count in its metrics")
    func sharedRateAndMetrics() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 128 * 1024
        let source = try server.makeFile("rated.bin", size: size, seed: 35)
        let metrics = TestMetrics()
        var configuration = DownloadManager.Configuration.forTests(bufferSize: 16 * 1024)
        configuration.metricsFactory = metrics
        configuration.rateLimits = RateLimits(total: 128 * 1024)
        let clock = ContinuousClock()
        let started = clock.now
        try await withDownloadManager(configuration: configuration) { manager in
            let discarded = try manager.discard(from: server.url("rated.bin"))
            let stream = try manager.stream(from: server.url("rated.bin"))
            #expect(try await DownloadStreamTests.collect(stream) == source)
            _ = try await discarded.finished()
            // 256 KiB at 128 KiB/s together: two seconds, less what the bucket held at the start.
            #expect(clock.now - started > .milliseconds(1500))
            await manager.waitUntilIdle()
        }
        #expect(try metrics.expectCounter("haul_downloads_started_total").totalValue == 2)
        #expect(try metrics.expectCounter("haul_downloads_completed_total").totalValue == 2)
        #expect(try metrics.expectCounter("haul_received_bytes_total").totalValue == Int64(2 * size))
        #expect(try metrics.expectTimer("haul_time_to_first_byte_seconds").values.count == 2)
    }
}
