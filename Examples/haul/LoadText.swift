import FoundationEssentials
import Glibc
import Haul

/// How `haul load` prints its report: as `hey` does (a summary, a table of percentiles, the phases,
/// status codes, errors), or as one JSON object (``LoadReport/Summary``).
enum LoadText {
    /// The report as one line of JSON and a newline: ``LoadReport/Summary``'s keys and `schema`, as
    /// every JSON object haul writes has (``JSONEvent/schema``).
    static func json(_ report: LoadReport) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(Versioned(summary: report.summary)) else { return "{}\n" }
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    /// The summary's keys beside `schema`.
    private struct Versioned: Encodable {
        let summary: LoadReport.Summary

        private enum Keys: String, CodingKey { case schema }

        func encode(to encoder: any Encoder) throws {
            try summary.encode(to: encoder)
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(JSONEvent.schema, forKey: .schema)
        }
    }

    /// The report for a terminal. `stoppedAtEnd`: a timed run (-z) stopped the downloads still in
    /// flight at its end, which are its cancelled ones.
    static func report(_ report: LoadReport, stoppedAtEnd: Bool = false) -> String {
        let summary = report.summary
        var text = "Summary:\n"
        text += "  Total:         \(seconds(summary.seconds)) s\n"
        text += "  Downloads:     \(summary.requests) (\(summary.completed) completed, \(summary.failed) failed"
        let cancelled = stoppedAtEnd ? "in flight at the end, stopped" : "cancelled"
        text += summary.cancelled > 0 ? ", \(summary.cancelled) \(cancelled))\n" : ")\n"
        text += "  Downloads/s:   \(Format.decimals(summary.requestsPerSecond, 1))\n"
        text += "  Received:      \(Reporter.size(summary.bytes)) (\(Reporter.size(Int64(summary.bytesPerSecond)))/s)\n"
        text += "  Connections:   \(summary.connectionsOpened) opened, \(summary.connectionsReused) reused\n"
        let rows = timeRows(report, summary, names: ("first byte", "total", "from schedule"))
        if !rows.isEmpty {
            text += "\nTimes (s)        min      mean     p50      p90      p95      p99      p99.9    max\n"
        }
        for (name, row) in rows {
            text += "  " + padded(name, 15)
            text += columns(of: row).map { padded(seconds($0), 8) }.joined(separator: " ").trimmingSpaces + "\n"
        }
        if report.total.count > 0 {
            text += "\nTotal time histogram (s):\n" + histogram(report.total)
        }
        if let throughput = summary.throughput {
            text +=
                "\nThroughput of bodies of 1 MiB or more, per download: p50 \(Reporter.size(Int64(throughput.p50)))/s, "
            text += "p99 \(Reporter.size(Int64(throughput.p99)))/s, min \(Reporter.size(Int64(throughput.min)))/s\n"
        }
        if report.firstByte.count > 0 {
            text += "\nPhases of each download's first answered request, from its start (s, mean / p99;"
            text += " name lookup, connect, TLS: the \(report.connect.count) that opened a connection):\n"
            for (name, phase) in phases(summary) {
                text += "  " + padded(name, 14)
                text += " \(seconds(phase.mean)) / \(seconds(phase.p99))\n"
            }
        }
        if !summary.statusCodes.isEmpty {
            text += "\nStatus codes:\n"
            for (status, count) in summary.statusCodes.sorted(by: { $0.key < $1.key }) {
                text += "  [\(status)] \(count)\n"
            }
        }
        if !summary.errorMessages.isEmpty {
            let classes = summary.errors.sorted { ($0.value, $1.key) > ($1.value, $0.key) }
            text += "\nErrors (by class: \(classes.map { "\($0.key) \($0.value)" }.joined(separator: ", "))):\n"
            for message in summary.errorMessages {
                text += "  [\(message.count)] \(message.message)\n"
            }
        }
        return text
    }

    /// Says how the run goes on standard error every `interval` until cancelled: elapsed, done, in
    /// flight, downloads/s since the last line, errors, and p50 and p99 so far (of the latency from
    /// the schedule when `scheduled`, else of the total time). `redrawn` (a terminal): one line drawn
    /// over itself and erased at the end; else a line each time, with a newline.
    static func live(
        _ recorder: LoadCommand.Recorder,
        since start: ContinuousClock.Instant,
        scheduled: Bool,
        every interval: Duration,
        redrawn: Bool
    ) async {
        var (previousDone, previousAt) = (0, start)
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            if Task.isCancelled { break }
            let now = ContinuousClock.now
            let (done, errors, p50, p99) = recorder.report.withLock { report in
                let times = scheduled ? report.latency : report.total
                return (
                    report.requests, report.failed,
                    times.count > 0 ? Double(times.value(atPercentile: 50)) / 1e9 : nil,
                    times.count > 0 ? Double(times.value(atPercentile: 99)) / 1e9 : nil
                )
            }
            let rate = Double(done - previousDone) / max(1e-3, Self.inSeconds(now - previousAt))
            (previousDone, previousAt) = (done, now)
            let line = liveLine(
                elapsed: Self.inSeconds(now - start),
                done: done,
                inFlight: recorder.started.load(ordering: .relaxed) - done,
                rate: rate,
                errors: errors,
                p50: p50,
                p99: p99
            )
            if redrawn {
                let columns = Reporter.terminalWidth(of: STDERR_FILENO)
                Reporter.write("\r\u{1B}[K" + Text.truncated(line, toColumns: columns - 1), to: STDERR_FILENO)
            } else {
                Reporter.write("haul load: \(line)\n", to: STDERR_FILENO)
            }
        }
        if redrawn { Reporter.write("\r\u{1B}[K", to: STDERR_FILENO) }
    }

    /// The live line's text.
    static func liveLine(
        elapsed: Double,
        done: Int,
        inFlight: Int,
        rate: Double,
        errors: Int,
        p50: Double?,
        p99: Double?
    ) -> String {
        var line = "\(Format.tenths(elapsed)) s · \(done) done · \(inFlight) in flight · \(Format.tenths(rate))/s"
        line += " · \(errors) \(errors == 1 ? "error" : "errors")"
        if let p50, let p99 { line += " · p50 \(shortTime(p50)) · p99 \(shortTime(p99))" }
        return line
    }

    /// Milliseconds under a second, else seconds.
    static func shortTime(_ seconds: Double) -> String {
        seconds < 1
            ? "\(Format.decimals(seconds * 1000, seconds < 0.01 ? 2 : 1)) ms" : "\(Format.decimals(seconds, 2)) s"
    }

    /// The rows of the times table (`summary` is `report`'s): time to first byte and total time when
    /// a download completed, latency from the schedule when there was one, under the `names` given.
    static func timeRows(
        _ report: LoadReport,
        _ summary: LoadReport.Summary,
        names: (firstByte: String, total: String, latency: String)
    ) -> [(name: String, times: LoadReport.Percentiles)] {
        var rows: [(name: String, times: LoadReport.Percentiles)] = []
        if report.timeToFirstByte.count > 0 { rows.append((names.firstByte, summary.timeToFirstByte)) }
        if report.total.count > 0 { rows.append((names.total, summary.total)) }
        if let latency = summary.latency { rows.append((names.latency, latency)) }
        return rows
    }

    /// A row's values in the table's column order: min, mean, p50, p90, p95, p99, p99.9, max.
    static func columns(of times: LoadReport.Percentiles) -> [Double] {
        [times.min, times.mean, times.p50, times.p90, times.p95, times.p99, times.p999, times.max]
    }

    /// libcurl's phases as the report names them, in their order (TLS over https only).
    static func phases(_ summary: LoadReport.Summary) -> [(name: String, phase: LoadReport.Percentiles)] {
        var phases = [("name lookup", summary.nameLookup), ("connect", summary.connect)]
        if let tls = summary.tls { phases.append(("TLS", tls)) }
        phases.append(("first byte", summary.firstByte))
        return phases
    }

    /// `histogram`'s values in `count` bins of equal width from its min to its max (one when they are
    /// all equal): each bin's upper mark (nanoseconds) and how many values fall in it, counted from the
    /// buckets (the values themselves are not kept).
    static func bins(_ histogram: PercentileHistogram, count: Int) -> [(mark: Double, count: Int)] {
        let (low, high) = (Double(histogram.min), Double(histogram.max))
        let steps = high > low ? count : 1
        var bins: [(mark: Double, count: Int)] = []
        var counted = 0
        for step in 1...steps {
            let mark = steps == 1 ? high : low + (high - low) * Double(step) / Double(steps)
            let below = step == steps ? histogram.count : histogram.countAtOrBelow(UInt64(mark))
            bins.append((mark, max(0, below - counted)))
            counted = max(counted, below)
        }
        return bins
    }

    /// `histogram` (nanoseconds) as `hey` draws one: ten bars of equal width from its min to its
    /// max, each the count of values up to its mark, the longest 40 `■`.
    static func histogram(_ histogram: PercentileHistogram) -> String {
        let marks = bins(histogram, count: 10).map { (seconds: $0.mark / 1e9, count: $0.count) }
        let longest = max(1, marks.map(\.count).max() ?? 1)
        return marks.map { mark in
            let bar = String(repeating: "■", count: (mark.count * 40 + longest - 1) / longest)
            return "  \(padded(seconds(mark.seconds), 8)) [\(mark.count)]\t|\(bar)\n"
        }.joined()
    }

    /// `text` with spaces after it up to `width` characters.
    static func padded(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - text.count))
    }

    /// Seconds to four decimals.
    static func seconds(_ value: Double) -> String { Format.decimals(value, 4) }

    /// A duration in seconds, with their fraction.
    static func inSeconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
