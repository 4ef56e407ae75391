import Foundation
import MetricsTestKit
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// The manager's swift-metrics, recorded into a `TestMetrics` of the test's own
/// (``DownloadManager/Configuration/metricsFactory``): nothing process-wide is bootstrapped.
@Suite("metrics", .timeLimit(.minutes(1)))
struct MetricsTests {
    func configuration(_ metrics: TestMetrics) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration.forTests()
        configuration.metricsFactory = metrics
        return configuration
    }

    @Test("downloads started, completed and failed by code, bytes received, and the timers and gauges of each")
    func countsDownloads() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let sizes = [10_000, 200_000, 1_000_000]
        for (index, size) in sizes.enumerated() { try server.makeFile("m\(index).bin", size: size) }
        let metrics = TestMetrics()
        try await withDownloadManager(configuration: configuration(metrics)) { manager in
            for index in sizes.indices {
                let destination = directory.appendingPathComponent("m\(index).bin")
                let file = try await manager.fetch(server.url("m\(index).bin"), to: destination)
                #expect(file == destination)
            }
            await #expect {
                try await manager.fetch(server.url("missing.bin"), to: directory.appendingPathComponent("missing.bin"))
            } throws: { error in
                (error as? DownloadError)?.code == .httpStatus
            }
            await manager.waitUntilIdle()
        }
        #expect(try metrics.expectCounter("haul_downloads_started_total").totalValue == 4)
        #expect(try metrics.expectCounter("haul_downloads_completed_total").totalValue == 3)
        #expect(try metrics.expectCounter("haul_downloads_failed_total", [("code", "httpStatus")]).totalValue == 1)
        #expect(try metrics.expectCounter("haul_received_bytes_total").totalValue == Int64(sizes.reduce(0, +)))
        #expect(try metrics.expectTimer("haul_time_to_first_byte_seconds").values.count == 3)
        let durations = try metrics.expectTimer("haul_download_duration_seconds").values
        #expect(durations.count == 3 && durations.allSatisfy { $0 > 0 })
        let running = try metrics.expectGauge("haul_downloads_running").values
        #expect(running.contains(1) && running.last == 0)
        #expect(try metrics.expectGauge("haul_downloads_queued").values.allSatisfy { $0 >= 0 })
        #expect(try metrics.expectGauge("haul_write_buffers_in_use").lastValue == 0)
        // This process holds its standard streams and the journal at least.
        #expect(try (metrics.expectGauge("haul_open_descriptors").lastValue ?? 0) >= 4)
        // A download that did not fail was never counted as one.
        #expect(metrics.counters(label: "haul_downloads_failed_total").count == 1)
    }

    @Test("over several connections, with a split that cuts a connection short, every byte is counted once")
    func segmentedBytesCountedOnce() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 4 * 1024 * 1024
        let source = try server.makeFile("uneven.bin", size: size, seed: 61)
        let destination = directory.appendingPathComponent("uneven.bin")
        let metrics = TestMetrics()
        var configuration = configuration(metrics)
        configuration.connectionsPerFile = 2
        configuration.minimumSegmentSize = 256 * 1024
        try await withDownloadManager(configuration: configuration) { manager in
            // The request without a range at 8 MiB/s, a ranged one at 1 MiB/s: the first finishes
            // its half early and splits the other's, whose answer goes on past its new end.
            _ = try await manager.download(from: server.url("uneven/uneven.bin"), to: destination).finished()
        }
        #expect(try Data(contentsOf: destination) == source)
        let requests = server.accessLog().filter { $0.uri == "/uneven/uneven.bin" }
        #expect(requests.count >= 3, "no split: \(requests.map(\.range))")
        // Before a Connection counted them: the other connections' bytes were not counted at all.
        #expect(try metrics.expectCounter("haul_received_bytes_total").totalValue == Int64(size))
    }

    @Test("an answer from byte 0 read past the bytes held counts them as sent again, and no restart")
    func resentBytesReadPast() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 2 * 1024 * 1024
        let source = try server.makeFile("norange.bin", size: size)
        let destination = directory.appendingPathComponent("norange.bin")
        let metrics = TestMetrics()
        var pausedAt: Int64 = 0
        try await withDownloadManager(configuration: configuration(metrics)) { manager in
            // 1 MiB at once, then slowly; a resume's range is ignored (a 200 with the whole file).
            let download = try manager.download(from: server.url("gated-norange/norange.bin"), to: destination)
            let paused = try #require(try await download.pauseOnceAndFinish(after: 256 * 1024))
            pausedAt = paused.pausedAt
            #expect(paused.file == destination)
        }
        #expect(try Data(contentsOf: destination) == source)
        // The same version (its strong ETag): read past the bytes on disk, not restarted.
        #expect(metrics.counters(label: "haul_downloads_restarted_total").isEmpty)
        #expect(try metrics.expectCounter("haul_resent_bytes_total").totalValue == pausedAt)
        #expect(try metrics.expectCounter("haul_received_bytes_total").totalValue == Int64(size) + pausedAt)
        #expect(try metrics.expectCounter("haul_downloads_started_total").totalValue == 2)
        #expect(try metrics.expectCounter("haul_downloads_completed_total").totalValue == 1)
    }

    @Test("a restart from zero counts its reason and the bytes that come again")
    func restartsAndResentBytes() async throws {
        try await withFaultServer { server, directory in
            let metrics = TestMetrics()
            var configuration = FaultTests().patient(directory)
            configuration.metricsFactory = metrics
            try await withDownloadManager(configuration: configuration) { manager in
                // Cut at 100,000 bytes; the resume finds another version (a new ETag), whole.
                let file = try await manager.fetch(
                    server.url("changing/100000/300000"),
                    to: directory.appendingPathComponent("out")
                )
                #expect(try Data(contentsOf: file) == FaultServer.body(size: 300_000, version: 2))
            }
            let restarts = try metrics.expectCounter("haul_downloads_restarted_total", [("reason", "remote_changed")])
            #expect(restarts.totalValue == 1)
            #expect(try metrics.expectCounter("haul_resent_bytes_total").totalValue == 100_000)
        }
    }

    @Test("a refused connection's retries are counted, then its failure by code")
    func retries() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let metrics = TestMetrics()
        var configuration = configuration(metrics)
        configuration.retryLimit = 2
        configuration.retryDelay = .milliseconds(10)
        try await withDownloadManager(configuration: configuration) { manager in
            // Port 1 on loopback: nothing listens there, the connection is refused at once.
            await #expect {
                try await manager.fetch(
                    URL(string: "http://127.0.0.1:1/file")!,
                    to: directory.appendingPathComponent("f")
                )
            } throws: { error in
                (error as? DownloadError)?.code == .transport
            }
        }
        #expect(try metrics.expectCounter("haul_download_retries_total").totalValue == 2)
        #expect(try metrics.expectCounter("haul_downloads_started_total").totalValue == 3)
        #expect(try metrics.expectCounter("haul_downloads_failed_total", [("code", "transport")]).totalValue == 1)
    }
}
