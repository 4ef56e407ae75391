import FoundationEssentials
import Glibc
import Haul

/// `haul load --report FILE.html`: the report as one self-contained page (inline CSS and SVG, no
/// script, nothing fetched), for a browser or a CI artefact: the summary, the percentile table, the
/// distribution of the times, and the run second by second.
enum LoadPage {
    /// What was run, for the page's heading.
    struct Run {
        /// The URLs taken in turn, passwords removed.
        var urls: [String]
        /// Downloads in flight at most.
        var concurrency: Int
        /// Downloads started per second (the open model), and the ramp up to it in seconds.
        var rate: Double?
        var ramp: Double?
        /// When the run started (wall clock).
        var started: Date
    }

    /// Each series' colour: one each across the page, so that a screenshot shows which plot drew.
    enum Colour {
        static let distribution = "#3b6fb6"
        static let total = "#6a3d9a"
        static let firstByte = "#e6a000"
        static let latency = "#e377c2"
        static let completed = "#2e8b57"
        static let received = "#17becf"
        static let inFlight = "#8c564b"
        static let errors = "#d62728"
        static let started = "#7b68ee"
        static let secondP50 = "#bcbd22"
        static let secondP99 = "#ff1493"
    }

    /// The page.
    static func html(_ report: LoadReport, run: Run) -> String {
        let summary = report.summary
        let target = run.urls.count == 1 ? run.urls[0] : "\(run.urls.count) URLs"
        var page = """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>haul load: \(escaped(target))</title>
            <style>\(style)</style>
            </head>
            <body>
            <h1>haul load</h1>

            """
        page += "<p class=\"run\">\(summary.requests) downloads of \(escaped(target)), "
        if let rate = run.rate {
            page += "\(SVGPlot.short(rate)) started per second"
            if let ramp = run.ramp { page += " after a ramp of \(SVGPlot.short(ramp)) s" }
            page += ", at most \(run.concurrency) at once"
        } else {
            page += "\(run.concurrency) at once"
        }
        page += "; started \(escaped(run.started.formatted(.iso8601))).</p>\n"
        if run.urls.count > 1 {
            page += "<details><summary>The URLs, taken in turn</summary><ul>"
            page += run.urls.prefix(100).map { "<li>\(escaped($0))</li>" }.joined()
            page += run.urls.count > 100 ? "<li>… and \(run.urls.count - 100) more</li>" : ""
            page += "</ul></details>\n"
        }
        page += summaryTable(summary)
        page += percentileTable(report, summary)
        page += "<h2>Distribution</h2>\n"
        if report.total.count > 0 {
            page += distributionPlot(report.total).svg
            page += percentilePlot(report).svg
        } else {
            page += "<p>No download completed: no time to plot.</p>\n"
        }
        page += "<h2>Over the run</h2>\n"
        for plot in timelinePlots(report.timeline, seconds: summary.seconds) { page += plot.svg }
        page +=
            "<p class=\"note\">Each second counts the downloads that ended in it; the last one, what remains of the run.</p>\n"
        page += detailTables(summary)
        page += "<footer>Made by haul \(escaped(DownloadManager.version)).</footer>\n</body>\n</html>\n"
        return page
    }

    private static let style = """
        body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;max-width:920px;\
        margin:24px auto;padding:0 16px}h1{font-size:26px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 8px;\
        border-bottom:1px solid #ddd}table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 12px 3px 0;\
        text-align:right;font-variant-numeric:tabular-nums}td:first-child,th:first-child{text-align:left}\
        th{font-weight:600;border-bottom:1px solid #ccc}.run,.note,footer{color:#555}svg{display:block;\
        margin:6px 0 14px}.plot-title{font-weight:600;font-size:14px}.grid{stroke:#e6e6e6}.axis{stroke:#888}\
        .y-tick{font-size:12px;text-anchor:end;dominant-baseline:middle;fill:#555}.x-tick{font-size:12px;\
        text-anchor:middle;fill:#555}.x-label,.y-label{font-size:12px;text-anchor:middle;fill:#333}\
        .legend{font-size:12px;fill:#333}.failed{color:#d62728;font-weight:600}footer{margin-top:32px;font-size:13px}
        """

    private static func summaryTable(_ summary: LoadReport.Summary) -> String {
        var rows = [
            ("Total", "\(Format.decimals(summary.seconds, 3)) s"),
            ("Downloads", "\(summary.requests)"),
            ("Completed", "\(summary.completed)"),
            ("Failed", summary.failed > 0 ? "<span class=\"failed\">\(summary.failed)</span>" : "0"),
        ]
        if summary.cancelled > 0 { rows.append(("Cancelled", "\(summary.cancelled)")) }
        rows += [
            ("Downloads/s", Format.decimals(summary.requestsPerSecond, 1)),
            ("Received", "\(Reporter.size(summary.bytes)) (\(Reporter.size(Int64(summary.bytesPerSecond)))/s)"),
            ("Connections", "\(summary.connectionsOpened) opened, \(summary.connectionsReused) reused"),
        ]
        return "<h2>Summary</h2>\n<table class=\"summary\">"
            + rows.map { "<tr><td>\($0.0)</td><td>\($0.1)</td></tr>" }.joined() + "</table>\n"
    }

    private static func percentileTable(_ report: LoadReport, _ summary: LoadReport.Summary) -> String {
        let rows = LoadText.timeRows(
            report,
            summary,
            names: ("First byte", "Total (service time)", "From schedule (latency)")
        )
        guard !rows.isEmpty else { return "" }
        var table = "<h2>Times (seconds)</h2>\n<table class=\"percentiles\"><tr><th></th>"
        table += ["min", "mean", "p50", "p90", "p95", "p99", "p99.9", "max"].map { "<th>\($0)</th>" }.joined()
        table += "</tr>"
        for (name, row) in rows {
            table += "<tr><td>\(name)</td>"
            table += LoadText.columns(of: row).map { "<td>\(Format.decimals($0, 4))</td>" }.joined() + "</tr>"
        }
        return table + "</table>\n"
    }

    private static func detailTables(_ summary: LoadReport.Summary) -> String {
        var html = "<h2>Phases of each download's first answered request (seconds from its start)</h2>\n"
        html += "<p class=\"note\">Name lookup, connect and TLS: of the downloads that opened a connection "
        html += "(over a reused one, libcurl says 0).</p>\n"
        html += "<table><tr><th></th><th>mean</th><th>p50</th><th>p99</th><th>max</th></tr>"
        for (name, phase) in LoadText.phases(summary) {
            html += "<tr><td>\(name.prefix(1).uppercased() + name.dropFirst())</td>"
            html += [phase.mean, phase.p50, phase.p99, phase.max].map { "<td>\(Format.decimals($0, 4))</td>" }.joined()
            html += "</tr>"
        }
        html += "</table>\n"
        if !summary.statusCodes.isEmpty {
            html += "<h2>Status codes</h2>\n<table>"
            for (status, count) in summary.statusCodes.sorted(by: { $0.key < $1.key }) {
                html += "<tr><td>\(escaped(status))</td><td>\(count)</td></tr>"
            }
            html += "</table>\n"
        }
        if !summary.errors.isEmpty {
            html += "<h2>Errors</h2>\n<table><tr><th>By class</th><th>downloads</th></tr>"
            for (category, count) in summary.errors.sorted(by: { ($0.value, $1.key) > ($1.value, $0.key) }) {
                html += "<tr><td>\(escaped(category))</td><td>\(count)</td></tr>"
            }
            html += "</table>\n<table><tr><th>In their words (the server, then what failed)</th><th>downloads</th></tr>"
            for message in summary.errorMessages {
                html += "<tr><td>\(escaped(message.message))</td><td>\(message.count)</td></tr>"
            }
            html += "</table>\n"
        }
        return html
    }

    /// The total times' histogram: 40 bars of equal width from the fastest to the slowest.
    static func distributionPlot(_ histogram: PercentileHistogram) -> SVGPlot {
        let (low, high) = (Double(histogram.min), Double(histogram.max))
        let unit = TimeUnit(max: high)
        let points = LoadText.bins(histogram, count: 40).map { (x: $0.mark / unit.nanoseconds, y: Double($0.count)) }
        var plot = SVGPlot(
            title: "Total time of each completed download",
            xLabel: "total time (\(unit.name))",
            yLabel: "downloads"
        )
        // The bars start at the fastest (a lone bar: a little before it).
        plot.xRange = (high > low ? low : high * 0.9) / unit.nanoseconds...high / unit.nanoseconds
        plot.series = [SVGPlot.Series(name: "downloads", colour: Colour.distribution, style: .bars, points: points)]
        return plot
    }

    /// Time to first byte, total time and (with a schedule) latency by percentile, on HdrHistogram's
    /// axis where the tail has room.
    static func percentilePlot(_ report: LoadReport) -> SVGPlot {
        let slowest = max(report.total.max, report.latency.max, report.timeToFirstByte.max)
        let unit = TimeUnit(max: Double(slowest))
        func points(_ histogram: PercentileHistogram) -> [(x: Double, y: Double)] {
            stride(from: 0.0, through: 4.0, by: 0.05).map { step in
                let percentile = 100 * (1 - pow(10, -step))
                return (percentile, Double(histogram.value(atPercentile: percentile)) / unit.nanoseconds)
            }
        }
        var plot = SVGPlot(title: "Times by percentile", xLabel: "percentile", yLabel: unit.name, xAxis: .percentile)
        // The total first, widest: a small body's first byte runs just under it.
        plot.series.append(.init(name: "total", colour: Colour.total, style: .line, points: points(report.total)))
        if report.timeToFirstByte.count > 0 {
            plot.series.append(
                .init(
                    name: "first byte",
                    colour: Colour.firstByte,
                    style: .line,
                    points: points(report.timeToFirstByte)
                )
            )
        }
        if report.latency.count > 0 {
            plot.series.append(
                .init(name: "from schedule", colour: Colour.latency, style: .line, points: points(report.latency))
            )
        }
        return plot
    }

    /// Downloads started and ended, the service time's p50 and p99, bytes received, downloads in
    /// flight and errors, second by second (over `seconds`, the run's length: its last second counts
    /// for its own length).
    static func timelinePlots(_ timeline: [LoadReport.Second], seconds: Double) -> [SVGPlot] {
        let spans = spans(of: timeline, seconds: seconds)
        let range = 0...max(1, spans.last.map { $0.start + $0.length } ?? 1)
        func plot(
            _ title: String,
            _ yLabel: String,
            _ colour: String,
            _ style: SVGPlot.Style,
            _ value: (LoadReport.Second) -> Double
        ) -> SVGPlot {
            var plot = SVGPlot(title: title, xLabel: "seconds from the start", yLabel: yLabel)
            plot.xRange = range
            plot.height = 190
            // A bar spans its second; a line's point sits in its middle.
            let points = spans.map { span in
                (x: span.start + (style == .bars ? span.length : span.length / 2), y: value(span.second) / span.length)
            }
            plot.series = [SVGPlot.Series(name: title, colour: colour, style: style, points: points)]
            return plot
        }
        return [
            plot("Downloads started per second", "downloads/s", Colour.started, .bars) { Double($0.started) },
            plot("Downloads completed per second", "downloads/s", Colour.completed, .bars) { Double($0.completed) },
            timesPlot(spans, range: range),
            plot("Received per second", "MB/s", Colour.received, .line) { Double($0.bytes) / 1e6 },
            plot("Downloads in flight (mean over each second)", "downloads", Colour.inFlight, .line) { $0.inFlight },
            plot("Downloads failed per second", "failed/s", Colour.errors, .bars) { Double($0.failed) },
        ]
    }

    /// The p50 and p99 of the service time of the downloads completed in each second (a second with
    /// none has no point).
    static func timesPlot(
        _ spans: [(start: Double, length: Double, second: LoadReport.Second)],
        range: ClosedRange<Double>
    ) -> SVGPlot {
        let unit = TimeUnit(max: (spans.compactMap(\.second.p99).max() ?? 0) * 1e9)
        var plot = SVGPlot(
            title: "Total time of the downloads completed in each second",
            xLabel: "seconds from the start",
            yLabel: unit.name
        )
        plot.xRange = range
        plot.height = 190
        func points(_ value: (LoadReport.Second) -> Double?) -> [(x: Double, y: Double)] {
            spans.compactMap { span in
                value(span.second).map { (x: span.start + span.length / 2, y: $0 * 1e9 / unit.nanoseconds) }
            }
        }
        plot.series = [
            SVGPlot.Series(name: "p99", colour: Colour.secondP99, style: .line, points: points(\.p99)),
            SVGPlot.Series(name: "p50", colour: Colour.secondP50, style: .line, points: points(\.p50)),
        ]
        return plot
    }

    /// The run's seconds as spans: each one second long but the last, which lasts what remains of
    /// `seconds` (under a quarter of a second, it joins the one before rather than make a rate of a
    /// few milliseconds).
    static func spans(
        of timeline: [LoadReport.Second],
        seconds: Double
    ) -> [(start: Double, length: Double, second: LoadReport.Second)] {
        var spans = timeline.enumerated().map { (start: Double($0.offset), length: 1.0, second: $0.element) }
        guard let last = spans.indices.last else { return spans }
        let remainder = min(1, max(0, seconds - Double(last)))
        if remainder >= 0.25 || last == 0 {
            spans[last].length = max(remainder, 0.001)
        } else {
            let tail = spans.removeLast().second
            spans[last - 1].length += remainder
            spans[last - 1].second.started += tail.started
            spans[last - 1].second.completed += tail.completed
            spans[last - 1].second.failed += tail.failed
            spans[last - 1].second.bytes += tail.bytes
            spans[last - 1].second.inFlight += tail.inFlight
        }
        return spans
    }

    /// Milliseconds below two seconds, else seconds.
    struct TimeUnit {
        let name: String
        let nanoseconds: Double

        init(max: Double) {
            (name, nanoseconds) = max < 2e9 ? ("ms", 1e6) : ("s", 1e9)
        }
    }

    /// `text` safe inside an element or an attribute.
    static func escaped(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.append(character)
            }
        }
        return result
    }
}
