import ArgumentParser
import FoundationEssentials
import Haul

/// A condition a `haul load` run must meet (`--threshold`, as k6's thresholds): `p99<500ms` (the
/// total time's 99th percentile), `ttfb.p95<100ms` (time to first byte), `latency.p99<1s` (from the
/// schedule, with --rate), `mean`, `min` and `max` too; `errors<1%` (failed downloads, of those that
/// ended; without `%` a count), `rps>1000` (downloads ended per second). Compared with `<`, `<=`, `>`
/// or `>=`; times in `us`, `ms` or `s`.
struct LoadThreshold: ExpressibleByArgument, Equatable, CustomStringConvertible {
    enum Measure: Equatable {
        /// A statistic (`p99`, `mean`, `max`…) of the total time, the time to first byte or the
        /// latency from the schedule, in seconds.
        case time(Series, Statistic)
        /// Failed downloads: a share of those that ended (`percent`), or a count.
        case errors(percent: Bool)
        /// Downloads ended per second.
        case requestsPerSecond
    }

    enum Series: String, Equatable {
        case total, ttfb, latency
    }

    enum Statistic: Equatable {
        case percentile(Double)
        case mean, min, max
    }

    enum Comparison: String, Equatable, CaseIterable {
        case atMost = "<=", atLeast = ">=", below = "<", above = ">"
    }

    let measure: Measure
    let comparison: Comparison
    /// Seconds for a time, a percentage or a count for errors, a rate for rps.
    let limit: Double
    /// As the user wrote it.
    let description: String

    init?(argument: String) {
        let text = argument.filter { $0 != " " }
        // The first of `<`, `>` splits the name from the limit; an `=` after it makes it `<=`, `>=`.
        guard let split = text.firstIndex(where: { $0 == "<" || $0 == ">" }) else { return nil }
        let name = text[..<split].lowercased()
        var rest = text[text.index(after: split)...]
        let orEqual = rest.first == "="
        if orEqual { rest = rest.dropFirst() }
        guard
            let comparison = Comparison(rawValue: String(text[split]) + (orEqual ? "=" : ""))
        else { return nil }
        var value = String(rest)
        self.comparison = comparison
        self.description = argument
        switch name {
        case "errors":
            let percent = value.hasSuffix("%")
            if percent { value.removeLast() }
            guard let number = Double(value), number >= 0 else { return nil }
            (measure, limit) = (.errors(percent: percent), number)
        case "rps":
            guard let number = Double(value), number >= 0 else { return nil }
            (measure, limit) = (.requestsPerSecond, number)
        default:
            var series = Series.total
            var statistic = name
            for candidate in [Series.total, .ttfb, .latency] where name.hasPrefix(candidate.rawValue + ".") {
                (series, statistic) = (candidate, String(name.dropFirst(candidate.rawValue.count + 1)))
            }
            guard let statistic = Self.statistic(statistic), let seconds = Self.seconds(value) else { return nil }
            (measure, limit) = (.time(series, statistic), seconds)
        }
    }

    /// `p99`, `p99.9`, `p999`, `p50`, `mean`, `min`, `max`.
    private static func statistic(_ text: String) -> Statistic? {
        switch text {
        case "mean", "avg": return .mean
        case "min": return .min
        case "max": return .max
        default:
            guard text.hasPrefix("p"), var percentile = Double(text.dropFirst()) else { return nil }
            if text == "p999" { percentile = 99.9 }
            return (0...100).contains(percentile) ? .percentile(percentile) : nil
        }
    }

    /// `250ms`, `1.5s`, `800us` as seconds.
    private static func seconds(_ text: String) -> Double? {
        for (unit, scale) in [("ms", 1e-3), ("us", 1e-6), ("µs", 1e-6), ("s", 1.0)] where text.hasSuffix(unit) {
            return Double(text.dropLast(unit.count)).flatMap { $0 >= 0 ? $0 * scale : nil }
        }
        return nil
    }

    /// The value `report` has for this threshold's measure, and whether it meets the limit. A time
    /// of a series with nothing measured (no completed download, no schedule) fails.
    func check(_ report: LoadReport) -> (value: Double, passed: Bool) {
        let value: Double?
        switch measure {
        case .time(let series, let statistic):
            let histogram =
                switch series {
                case .total: report.total
                case .ttfb: report.timeToFirstByte
                case .latency: report.latency
                }
            guard histogram.count > 0 else { return (.nan, false) }
            value =
                switch statistic {
                case .percentile(let percentile): Double(histogram.value(atPercentile: percentile)) / 1e9
                case .mean: histogram.mean / 1e9
                case .min: Double(histogram.min) / 1e9
                case .max: Double(histogram.max) / 1e9
                }
        case .errors(let percent):
            let ended = report.completed + report.failed
            value = percent ? (ended == 0 ? 0 : Double(report.failed) * 100 / Double(ended)) : Double(report.failed)
        case .requestsPerSecond:
            value = report.requestsPerSecond
        }
        guard let value else { return (.nan, false) }
        let passed =
            switch comparison {
            case .below: value < limit
            case .atMost: value <= limit
            case .above: value > limit
            case .atLeast: value >= limit
            }
        return (value, passed)
    }

    /// What `check` found, in words: `p99<500ms: 0.6123 s`.
    func verdict(_ report: LoadReport) -> String {
        let (value, passed) = check(report)
        let shown: String
        switch measure {
        case .time: shown = value.isNaN ? "nothing measured" : "\(Format.decimals(value, 4)) s"
        case .errors(let percent): shown = percent ? "\(Format.decimals(value, 2)) %" : "\(Int(value))"
        case .requestsPerSecond: shown = "\(Format.decimals(value, 1))/s"
        }
        return "\(passed ? "passed" : "FAILED"): \(description) (\(shown))"
    }
}
