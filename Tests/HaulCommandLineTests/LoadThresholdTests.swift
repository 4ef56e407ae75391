import Testing

@testable import Haul
@testable import HaulCLI
@testable import HaulValues

/// `haul load`'s thresholds and schedule (issue 60, items 2 and 3): parsed as k6 writes them,
/// checked against a report; the open model's starts due at the rate, after a linear ramp.
@Suite("haul load: thresholds and schedule")
struct LoadThresholdTests {
    @Test("thresholds parse as written, with their units and comparisons; nonsense is refused")
    func parses() throws {
        let p99 = try #require(LoadThreshold(argument: "p99<500ms"))
        #expect(p99.measure == .time(.total, .percentile(99)) && p99.comparison == .below && p99.limit == 0.5)
        let ttfb = try #require(LoadThreshold(argument: "ttfb.p95 <= 100us"))
        #expect(ttfb.measure == .time(.ttfb, .percentile(95)) && ttfb.comparison == .atMost)
        #expect(abs(ttfb.limit - 0.0001) < 1e-12)
        #expect(LoadThreshold(argument: "latency.p99.9<2s")?.measure == .time(.latency, .percentile(99.9)))
        #expect(LoadThreshold(argument: "p999<2s")?.measure == .time(.total, .percentile(99.9)))
        #expect(LoadThreshold(argument: "mean<1.5s")?.measure == .time(.total, .mean))
        let errors = try #require(LoadThreshold(argument: "errors<1%"))
        #expect(errors.measure == .errors(percent: true) && errors.limit == 1)
        #expect(LoadThreshold(argument: "errors<=3")?.measure == .errors(percent: false))
        let rps = try #require(LoadThreshold(argument: "rps>=1000"))
        #expect(rps.measure == .requestsPerSecond && rps.comparison == .atLeast && rps.limit == 1000)
        for bad in [
            "p99", "p99<", "p99<5", "p101<1s", "q99<1s", "rps>fast", "errors<-1%", "ttfb.mean<", "<1s", "p99=1s",
        ] {
            #expect(LoadThreshold(argument: bad) == nil, "\(bad)")
        }
    }

    @Test("a threshold passes or fails on the report's figures; a time with nothing measured fails")
    func checks() throws {
        let start = ContinuousClock.now
        var report = LoadReport(start: start)
        for index in 0..<99 {
            report.record(
                DownloadTimings(timeToFirstByte: .milliseconds(5), total: .milliseconds(10), attempts: 1),
                outcome: .completed,
                end: start + .milliseconds(10 * (index + 1))
            )
        }
        report.record(
            DownloadTimings(total: .milliseconds(1), attempts: 1),
            outcome: .failed(DownloadError(code: .httpStatus, url: "http://h/x", httpStatus: 503)),
            end: start + .seconds(1)
        )
        func passes(_ text: String) throws -> Bool { try #require(LoadThreshold(argument: text)).check(report).passed }
        #expect(try passes("p99<11ms") && !(try passes("p99<9ms")) && (try passes("max<=10ms")))
        #expect(try passes("ttfb.p50<6ms") && !(try passes("ttfb.p50>6ms")))
        #expect(try passes("errors<=1%") && !(try passes("errors<1%")) && (try passes("errors<2")))
        #expect(try passes("rps>=100") && !(try passes("rps>100.5")))
        // No schedule: no latency to compare.
        #expect(!(try passes("latency.p99<100s")))
        #expect(try #require(LoadThreshold(argument: "errors<1%")).verdict(report) == "FAILED: errors<1% (1.00 %)")
    }

    @Test("the open model's starts: the rate's, after a ramp holding rate × ramp / 2 of them")
    func schedule() {
        // Without a ramp: one every 1/rate s.
        #expect(LoadCommand.Schedule.offset(of: 0, rate: 100, ramp: 0) == 0)
        #expect(abs(LoadCommand.Schedule.offset(of: 250, rate: 100, ramp: 0) - 2.5) < 1e-12)
        // A 4 s ramp to 100/s: 200 downloads in it, the rate's spacing after it.
        #expect(abs(LoadCommand.Schedule.offset(of: 200, rate: 100, ramp: 4) - 4) < 1e-9)
        #expect(abs(LoadCommand.Schedule.offset(of: 300, rate: 100, ramp: 4) - 5) < 1e-9)
        // Half way through the ramp (t = 2 s), a quarter of its downloads: 50.
        #expect(abs(LoadCommand.Schedule.offset(of: 50, rate: 100, ramp: 4) - 2) < 1e-9)
        // Always later for a later download.
        var last = -1.0
        for index in 0..<1000 {
            let offset = LoadCommand.Schedule.offset(of: index, rate: 100, ramp: 3)
            #expect(offset > last)
            last = offset
        }
    }
}
