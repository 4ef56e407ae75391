import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// The load test's report (issue 60, item 1): percentiles in constant memory within 1 %, and what a
/// report adds up from the downloads it is fed.
@Suite("Load report")
struct LoadReportTests {
    static let seed = UInt64(Date().timeIntervalSince1970 * 1000)

    /// The value of nearest rank ⌈p × n / 100⌉ of `sorted`.
    static func exact(_ sorted: [UInt64], _ percentile: Double) -> UInt64 {
        let rank = max(1, min(sorted.count, Int((percentile / 100 * Double(sorted.count)).rounded(.up))))
        return sorted[rank - 1]
    }

    @Test("percentiles of 200,000 values from 1 µs to 100 s are within 1 % of the exact ones; min and max exact")
    func percentilesWithinOnePercent() {
        var random = SeededGenerator(seed: Self.seed)
        var histogram = PercentileHistogram()
        var values: [UInt64] = []
        for _ in 0..<200_000 {
            // Log-uniform: every decade as likely, as latencies spread.
            let value = UInt64(pow(10, Double.random(in: 3...11, using: &random)))
            values.append(value)
            histogram.record(value)
        }
        values.sort()
        #expect(histogram.count == values.count)
        #expect(histogram.min == values.first && histogram.max == values.last)
        let mean = values.reduce(0.0) { $0 + Double($1) } / Double(values.count)
        #expect(abs(histogram.mean - mean) / mean < 1e-9)
        for percentile in [0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99] {
            let exact = Double(Self.exact(values, percentile))
            let reported = Double(histogram.value(atPercentile: percentile))
            #expect(
                abs(reported - exact) / exact <= 0.01,
                "p\(percentile): \(reported) for \(exact), seed \(Self.seed)"
            )
        }
        // Counts up to a mark: exact to the mark's bucket, which holds at most 1/128 of it more.
        for mark in [UInt64(5_000), 1_000_000, 123_456_789, 60_000_000_000] {
            let counted = histogram.countAtOrBelow(mark)
            let exact = values.filter { $0 <= mark }.count
            let widened = values.filter { Double($0) <= Double(mark) * (1 + 1.0 / 128) }.count
            #expect(counted >= exact && counted <= widened, "\(mark): \(counted), \(exact)...\(widened)")
        }
        #expect(histogram.value(atPercentile: 100) == values.last)
        #expect(histogram.value(atPercentile: 0) == values.first)
    }

    @Test("buckets cover every value once, each within 0.4 % of its middle, 7,424 at most")
    func buckets() {
        var lowest: UInt64 = 0
        for index in 0..<7424 {
            let (start, width) = PercentileHistogram.range(of: index)
            #expect(start == lowest, "bucket \(index)")
            #expect(
                PercentileHistogram.bucket(of: start) == index
                    && PercentileHistogram.bucket(of: start &+ (width - 1)) == index
            )
            let middle = Double(PercentileHistogram.middle(of: index))
            #expect((middle - Double(start)) / max(1, Double(start)) <= 1 / 256)
            lowest = start &+ width
        }
        #expect(lowest == 0)  // the last bucket ends at 2^64: nothing is left over
        #expect(PercentileHistogram.bucket(of: .max) == 7423)
    }

    @Test("a histogram merged from two is the histogram of every value; an empty one says 0")
    func merge() {
        var random = SeededGenerator(seed: Self.seed)
        var (all, first, second) = (PercentileHistogram(), PercentileHistogram(), PercentileHistogram())
        for index in 0..<10_000 {
            let value = UInt64.random(in: 0...5_000_000_000, using: &random)
            all.record(value)
            if index % 3 == 0 { first.record(value) } else { second.record(value) }
        }
        first.merge(second)
        #expect(first.count == all.count && first.min == all.min && first.max == all.max)
        for percentile in [1.0, 50, 99, 99.9] {
            #expect(first.value(atPercentile: percentile) == all.value(atPercentile: percentile))
        }
        let empty = PercentileHistogram()
        #expect(empty.count == 0 && empty.value(atPercentile: 50) == 0 && empty.mean == 0)
    }

    @Test("a report adds up outcomes, statuses, error classes, connections, phases and the run second by second")
    func report() throws {
        let start = ContinuousClock.now
        var report = LoadReport(start: start)
        let phases = DownloadTimings.Phases(
            nameLookup: .microseconds(100),
            connect: .microseconds(300),
            tls: nil,
            firstByte: .milliseconds(2)
        )
        // Ten of 64 KiB ending in second 0, each 100 ms (TTFB 10 ms) over one connection reused 9 times.
        for index in 0..<10 {
            let timings = DownloadTimings(
                timeToFirstByte: .milliseconds(10),
                total: .milliseconds(100),
                bytes: 65_536,
                attempts: 1,
                connectionsOpened: index == 0 ? 1 : 0,
                connectionsReused: index == 0 ? 0 : 1,
                phases: phases,
                status: 200
            )
            report.record(timings, outcome: .completed, end: start + .milliseconds(200 + index))
        }
        // Two 4 MiB bodies in 2 s each, ending in second 3, one due 1 s before it started.
        for _ in 0..<2 {
            let timings = DownloadTimings(total: .seconds(2), bytes: 4 << 20, attempts: 1, status: 200)
            report.record(timings, outcome: .completed, scheduledAt: start, end: start + .milliseconds(3500))
        }
        // A 404 and a connection refused in second 1, a cancel.
        report.record(
            DownloadTimings(total: .milliseconds(5), attempts: 1, status: 404),
            outcome: .failed(DownloadError(code: .httpStatus, url: "http://h/missing", httpStatus: 404)),
            end: start + .milliseconds(1200)
        )
        report.record(
            DownloadTimings(total: .milliseconds(1), attempts: 1),
            outcome: .failed(DownloadError(code: .transport, url: "http://h/x", curlCode: 7, detail: "refused")),
            end: start + .milliseconds(1300)
        )
        report.record(DownloadTimings(), outcome: .cancelled, end: start + .milliseconds(1400))

        #expect(report.requests == 15 && report.completed == 12 && report.failed == 2 && report.cancelled == 1)
        #expect(report.bytes == 10 * 65_536 + 2 * (4 << 20))
        #expect(report.statusCodes == [200: 12, 404: 1])
        #expect(report.errors == [.httpStatus: 1, .connection: 1])
        #expect(report.connectionsOpened == 1 && report.connectionsReused == 9)
        #expect(report.duration == .milliseconds(3500))
        #expect(abs(report.requestsPerSecond - 14 / 3.5) < 1e-9)
        // Completed ones only, in nanoseconds.
        #expect(report.total.count == 12 && report.timeToFirstByte.count == 10)
        #expect(report.timeToFirstByte.value(atPercentile: 50) == 10_000_000)
        #expect(report.total.min == 100_000_000 && report.total.max == 2_000_000_000)
        // Throughput of the two bodies over 1 MiB only: 2 MiB/s.
        #expect(report.throughput.count == 2 && report.throughput.value(atPercentile: 50) == 1 << 21)
        // Latency from the schedule: 3.5 s, where the service time says 2 s.
        #expect(report.latency.count == 2 && report.latency.value(atPercentile: 99) == 3_500_000_000)
        // Name lookup and connect of the one download that opened the connection; first byte of all ten.
        #expect(report.nameLookup.count == 1 && report.connect.value(atPercentile: 50) == 300_000)
        #expect(report.firstByte.count == 10)
        #expect(report.tls.count == 0 && report.firstByte.max == 2_000_000)
        let service = LoadReport.Percentiles(report.total, unit: 1e9)
        #expect(service.min == 0.1 && abs(service.p50 - 0.1) / 0.1 <= 1.0 / 256 && service.p99 == 2 && service.max == 2)
        #expect(abs(service.mean - (10 * 0.1 + 2 * 2) / 12) < 1e-9)
        // As JSON: the names `haul load --json` writes, times in seconds, statuses and classes by name.
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(report.summary)) as? [String: Any]
        let object = try #require(json)
        #expect(object["requests"] as? Int == 15 && object["completed"] as? Int == 12 && object["failed"] as? Int == 2)
        #expect(object["seconds"] as? Double == 3.5 && object["bytes"] as? Int == 10 * 65_536 + 2 * (4 << 20))
        #expect(object["statusCodes"] as? [String: Int] == ["200": 12, "404": 1])
        #expect(object["errors"] as? [String: Int] == ["httpStatus": 1, "connection": 1])
        let firstByte = try #require(object["timeToFirstByte"] as? [String: Double])
        #expect(Set(firstByte.keys) == ["min", "mean", "p50", "p90", "p95", "p99", "p999", "max"])
        #expect(firstByte["p99"] == 0.01 && (object["total"] as? [String: Double])?["max"] == 2)
        #expect(object["tls"] == nil && (object["throughput"] as? [String: Double])?["p50"] == Double(1 << 21))
        let timeline = report.timeline
        #expect(timeline.map(\.completed) == [10, 0, 0, 2])
        #expect(timeline.map(\.failed) == [0, 2, 0, 0])
        #expect(timeline[3].bytes == 2 * (4 << 20))
        // In flight on average over each second: the ten 100 ms ones in second 0 (1.0); the two long
        // ones from 1.5 s to 3.5 s (half of second 1 each, all of 2, half of 3), the 404's 5 ms and
        // the refusal's 1 ms in second 1.
        let expected = [1.0, 1.006, 2.0, 1.0]
        #expect(
            zip(timeline.map(\.inFlight), expected).allSatisfy { abs($0 - $1) < 1e-6 },
            "\(timeline.map(\.inFlight))"
        )
        // Started where each first request went out (the cancel, which made none, where it ended):
        // the ten and the three of second 1; the two long ones at 1.5 s.
        #expect(timeline.map(\.second) == [0, 1, 2, 3] && timeline.map(\.started) == [10, 5, 0, 0])
        // Each second's service times: the ten of 100 ms, the two of 2 s; none in seconds 1 and 2.
        #expect(timeline.map(\.p50) == [0.1, nil, nil, 2] && timeline.map(\.p99) == [0.1, nil, nil, 2])
        let series = try #require(object["series"] as? [[String: Any]])
        #expect(series.map { $0["started"] as? Int } == [10, 5, 0, 0] && series[3]["p99"] as? Double == 2)
    }

    @Test("every answer is counted by its status: a download's earlier answers beside its last")
    func everyAnswer() {
        var report = LoadReport()
        report.record(
            DownloadTimings(total: .milliseconds(30), attempts: 3, status: 200, earlierStatuses: [503, 503]),
            outcome: .completed
        )
        report.record(
            DownloadTimings(total: .milliseconds(5), attempts: 1, status: 206, earlierStatuses: [206, 206]),
            outcome: .completed
        )
        report.record(
            DownloadTimings(total: .milliseconds(5), attempts: 1, status: 503),
            outcome: .failed(DownloadError(code: .httpStatus, url: "http://h/x", httpStatus: 503))
        )
        #expect(report.statusCodes == [200: 1, 206: 3, 503: 3])
        #expect(report.requests == 3 && report.completed == 2 && report.failed == 1)
    }

    @Test(
        "errors by their words: one per server and cause, numbers aside; most frequent first; at most 100 and the rest"
    )
    func errorMessages() throws {
        var report = LoadReport()
        func refusal(_ url: String, _ milliseconds: Int) -> LoadReport.Outcome {
            .failed(
                DownloadError(
                    code: .transport,
                    url: url,
                    curlCode: 7,
                    detail: "Failed to connect to 127.0.0.1 port 9 after \(milliseconds) ms: Couldn't connect to server"
                )
            )
        }
        let status: (Int) -> LoadReport.Outcome = {
            .failed(DownloadError(code: .httpStatus, url: "https://mirror.example/a?token=1", httpStatus: $0))
        }
        report.record(DownloadTimings(), outcome: status(503))
        for milliseconds in [0, 3, 17] {
            report.record(DownloadTimings(), outcome: refusal("http://127.0.0.1:9/a", milliseconds))
        }
        report.record(DownloadTimings(), outcome: refusal("http://127.0.0.1:9/other", 1))
        report.record(DownloadTimings(), outcome: refusal("http://[::1]:9/a", 0))
        report.record(DownloadTimings(), outcome: status(502))
        report.record(DownloadTimings(), outcome: status(503))
        let messages = report.errorMessages
        #expect(messages.map(\.count) == [4, 2, 1, 1], "\(messages)")
        // The first message's words, with its server's host and port (the scheme's when none), not its URL.
        #expect(
            messages[0].message
                == "127.0.0.1:9: Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server (curl error 7)"
        )
        #expect(messages[1].message.hasPrefix("mirror.example:443: the server answered HTTP 503"))
        // A tie keeps the order they came in: [::1] before the 502.
        #expect(messages[2].message.hasPrefix("[::1]:9: ") && messages[3].message.contains("HTTP 502"))
        #expect(report.summary.errorMessages == messages)

        var many = LoadReport()
        for index in 0..<(LoadReport.distinctMessages + 5) {
            many.record(DownloadTimings(), outcome: refusal("http://10.0.0.\(index % 250):\(1000 + index)/", 0))
        }
        let kept = many.errorMessages
        #expect(
            kept.count == LoadReport.distinctMessages + 1
                && kept.map(\.count).reduce(0, +) == LoadReport.distinctMessages + 5
        )
        #expect(kept.first?.count == 5 && kept.first?.message == "(other messages, past 100)", "\(kept.prefix(2))")
    }

    @Test(
        "a coarse histogram (8 buckets per power of two): buckets cover every value once, each within 6.25 % of its middle"
    )
    func coarseBuckets() {
        var lowest: UInt64 = 0
        for index in 0..<496 {
            let (start, width) = PercentileHistogram.range(of: index, subBits: 3)
            #expect(start == lowest, "bucket \(index)")
            #expect(
                PercentileHistogram.bucket(of: start, subBits: 3) == index
                    && PercentileHistogram.bucket(of: start &+ (width - 1), subBits: 3) == index
            )
            let middle = Double(PercentileHistogram.middle(of: index, subBits: 3))
            #expect((middle - Double(start)) / max(1, Double(start)) <= 1 / 16)
            lowest = start &+ width
        }
        #expect(lowest == 0)
        var coarse = PercentileHistogram(subBits: 3)
        var fine = PercentileHistogram()
        for value in stride(from: UInt64(1_000_000), through: 900_000_000, by: 1_000_000) {
            coarse.record(value)
            fine.record(value)
        }
        for percentile in [50.0, 90, 99] {
            let exact = Double(fine.value(atPercentile: percentile))
            #expect(abs(Double(coarse.value(atPercentile: percentile)) - exact) / exact <= 1.0 / 16 + 0.01)
        }
        // Histograms of different precision are not merged into each other.
        fine.merge(coarse)
        #expect(fine.count == 900)
    }
}
