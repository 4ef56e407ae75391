import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulTransfer
@testable import HaulValues

/// Rate limits (issue 19, item 6): token buckets per download, per host and for the manager, shared
/// out on the loop by pausing and unpausing transfers. The algorithm's accuracy over a 10 s window
/// is checked here on a simulated clock; the real rates against nginx are measured by the
/// benchmarks (targets are never timed unit tests). The tests against nginx check only what load
/// cannot break: a limited download never finishes sooner than its limit allows, whole.
@Suite("Rate limits", .timeLimit(.minutes(2)))
struct RateLimitTests {
    // MARK: the bucket, on a simulated clock

    @Test(
        "a bucket passes its rate over 10 s within 3 % (the target is 5 %), down to 10 KB/s, chunks at most a twentieth of it, from a fast source"
    )
    func bucketAccuracy() {
        for (rate, chunk) in [
            (1_000_000 as Int64, 16 * 1024), (50_000, 1024), (10_000_000, 500_000), (300_000, 15_000), (20_000, 1024),
            (10_000, 1024),
        ] {
            let start: UInt64 = 1_000_000_000
            var bucket = TokenBucket(rate: rate, now: start)
            var now = start
            var passed = 0
            let end = start + 10_000_000_000
            // A source that always has a chunk ready: it is offered whenever the bucket allows.
            while now < end {
                if bucket.mustWait(now: now) {
                    now += max(bucket.wait, 5_000_000)  // the limiter's timer: at most every 5 ms
                    continue
                }
                bucket.take(chunk, now: now)
                passed += chunk
                now += 100_000  // the network's own pace: 0.1 ms per chunk, far faster than the limit
            }
            let expected = Double(rate) * 10
            #expect(abs(Double(passed) - expected) / expected < 0.03, "rate \(rate), chunk \(chunk): \(passed)")
        }
    }

    @Test("a new rate takes effect at once; debt is paid at the new rate")
    func bucketRateChange() {
        var bucket = TokenBucket(rate: 1000, now: 0)
        bucket.take(Int(bucket.capacity) + 2000, now: 0)
        let waits = bucket.mustWait(now: 0)
        #expect(waits)
        #expect(bucket.wait == 2_000_000_000)  // 2,000 bytes at 1,000 B/s
        bucket.setRate(4000, now: 0)
        #expect(bucket.wait == 500_000_000)
        let stillWaits = bucket.mustWait(now: 500_000_000)
        #expect(!stillWaits)
    }

    // MARK: against nginx

    func configuration(_ limits: RateLimits) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration()
        configuration.bufferSize = 64 * 1024
        configuration.rateLimits = limits
        configuration.progressInterval = .milliseconds(20)
        return configuration
    }

    @Test("per download, per host and in total: never sooner than the limit allows, and whole")
    func limits() async throws {
        let (server, directory) = try await startServerAndDirectory(
            own: "a second host (localhost) is written by hand from the port"
        )
        defer { stop(server, directory) }
        let size = 1_500_000
        let a = try server.makeFile("a.bin", size: size, seed: 1)
        let b = try server.makeFile("b.bin", size: size, seed: 2)
        let rate: Int64 = 1_000_000
        // The buckets start full (a twentieth of a second of the rate each) and a chunk may overshoot.
        let slack = 0.25
        let other = URL(string: "http://localhost:\(server.port)/b.bin")!
        let cases: [(String, RateLimits, [(URL, Data)], Double)] = [
            ("per download", RateLimits(perDownload: rate), [(server.url("a.bin"), a)], 1.5),
            ("per host", RateLimits(perHost: rate), [(server.url("a.bin"), a), (server.url("b.bin"), b)], 3.0),
            ("in total", RateLimits(total: rate), [(server.url("a.bin"), a), (other, b)], 3.0),
        ]
        for (name, limits, downloads, seconds) in cases {
            let folder = directory.appendingPathComponent(name)
            let took = try await timed {
                try await withDownloadManager(configuration: configuration(limits)) { manager in
                    let started = try downloads.enumerated().map { index, item in
                        try manager.download(from: item.0, to: folder.appendingPathComponent("\(index)"))
                    }
                    for download in started { _ = try await download.finished() }
                }
            }
            #expect(took >= .seconds(seconds - slack), "\(name) took \(took)")
            for (index, item) in downloads.enumerated() {
                #expect(try Data(contentsOf: folder.appendingPathComponent("\(index)")) == item.1, "\(name)")
            }
        }
    }

    @Test("a download's own limit, and limits changed while it runs, take effect at once")
    func changedWhileRunning() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 3 * 1024 * 1024
        let source = try server.makeFile("c.bin", size: size)
        try await withDownloadManager(configuration: configuration(RateLimits(total: 200_000))) { manager in
            var request = DownloadRequest(
                url: server.url("c.bin"),
                destination: directory.appendingPathComponent("own")
            )
            request.maxBytesPerSecond = 100_000
            let own = try manager.download(request)
            var events = own.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
            // Lifted, the rest comes faster than the download's own limit (100 KB/s) could ever let
            // it: that limit no longer holds. (A bound set by the limit, not by the machine's speed.)
            let left = Int64(size) - own.bytesReceivedInThisProcess
            let took = try await timed {
                manager.setRateLimits(RateLimits())
                own.setMaxBytesPerSecond(nil)
                _ = try await own.finished()
            }
            #expect(
                took < .seconds(Double(left) / 100_000),
                "took \(took) for \(left) bytes after the limits were lifted"
            )
            #expect(manager.rateLimits == RateLimits())
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("own")) == source)
    }

    @Test("a default per download set while a download runs unlimited limits it at once")
    func defaultSetWhileRunning() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("d.bin", size: 1_500_000)
        let limit: Int64 = 50_000
        try await withDownloadManager(configuration: configuration(RateLimits())) { manager in
            // 256 KB/s from nginx: still running when the limit arrives, however slow the machine.
            let download = try manager.download(
                from: server.url("slowest/d.bin"),
                to: directory.appendingPathComponent("d")
            )
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
            manager.setRateLimits(RateLimits(perDownload: limit))
            // Measured from the bytes received, over at least a second and a half of later events:
            // never more than the limit allows (plus the bucket's burst and a chunk or two).
            let clock = ContinuousClock()
            var first: (ContinuousClock.Instant, Int64)?
            while let event = await events.next() {
                guard case .progress = event else { continue }
                let now = (clock.now, download.bytesReceivedInThisProcess)
                guard let start = first else {
                    first = now
                    continue
                }
                let elapsed = now.0 - start.0
                guard elapsed >= .seconds(1.5) else { continue }
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                let allowed = Double(limit) * seconds + 2 * 16 * 1024 + Double(limit) / 20
                #expect(Double(now.1 - start.1) <= allowed, "\(now.1 - start.1) bytes in \(elapsed)")
                break
            }
            manager.setRateLimits(RateLimits())
            _ = try await download.finished()
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("d")) == source)
    }

    @Test("pausing a download the limiter holds paused, then resuming it, still ends whole")
    func pauseWhileHeld() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("p.bin", size: 600_000)
        let destination = directory.appendingPathComponent("p.bin")
        try await withDownloadManager(configuration: configuration(RateLimits(perDownload: 200_000))) { manager in
            let download = try manager.download(from: server.url("p.bin"), to: destination)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 100_000 } else { false } }
            await download.pause()
            await events.next { if case .paused = $0 { true } else { false } }
            await download.resume()
            #expect(try await download.finished() == destination)
        }
        #expect(try Data(contentsOf: destination) == source)
    }
}
