import FoundationEssentials
import Glibc

/// A small plot drawn as inline SVG, for `haul load --report`'s page: axes with round ticks, a grid,
/// and series drawn as lines or bars. No script and no external resource: the page is one file.
struct SVGPlot {
    /// How a series is drawn.
    enum Style {
        /// A line through the points (with a dot on each when there are few).
        case line
        /// One bar a point, from the x before it (or the axis's start) to its own, up from 0.
        case bars
    }

    /// Values to draw, in one colour.
    struct Series {
        var name: String
        var colour: String
        var style: Style
        var points: [(x: Double, y: Double)]
    }

    /// How the x axis maps its values: linearly, or as percentiles spread by `-log10(1 - p)` (the
    /// HdrHistogram plot's axis, where 90 %, 99 % and 99.9 % are equally far apart).
    enum XAxis {
        case linear
        case percentile
    }

    var title: String
    var xLabel: String
    var yLabel: String
    var xAxis = XAxis.linear
    /// The x axis's span (default: the points', or the percentiles 0 to 99.99).
    var xRange: ClosedRange<Double>?
    var series: [Series] = []
    /// Formats a y tick's value.
    var yFormat: (Double) -> String = SVGPlot.short
    var width = 880.0
    var height = 230.0

    private let left = 72.0, right = 18.0, top = 30.0, bottom = 42.0

    /// The plot as an `<svg>` element.
    var svg: String {
        let points = series.flatMap(\.points)
        let xs = points.map { position($0.x) }
        var (xLow, xHigh) = xAxis == .percentile ? (0, 4) : (xs.min() ?? 0, xs.max() ?? 1)
        if let xRange { (xLow, xHigh) = (position(xRange.lowerBound), position(xRange.upperBound)) }
        if !(xHigh > xLow) { xHigh = xLow + 1 }
        let yHigh = Self.niceCeiling(points.map(\.y).max() ?? 0)
        let (plotWidth, plotHeight) = (width - left - right, height - top - bottom)
        let x = { (value: Double) in self.left + (self.position(value) - xLow) / (xHigh - xLow) * plotWidth }
        let y = { (value: Double) in self.top + plotHeight - value / yHigh * plotHeight }
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"\(Self.n(width))\" "
        svg += "height=\"\(Self.n(height))\" viewBox=\"0 0 \(Self.n(width)) \(Self.n(height))\">\n"
        svg += "<title>\(LoadPage.escaped(title))</title>\n"
        svg += "<text x=\"\(Self.n(left))\" y=\"18\" class=\"plot-title\">\(LoadPage.escaped(title))</text>\n"
        // The y axis: five round steps from 0.
        for tick in Self.ticks(upTo: yHigh) {
            let at = Self.n(y(tick))
            svg +=
                "<line x1=\"\(Self.n(left))\" x2=\"\(Self.n(width - right))\" y1=\"\(at)\" y2=\"\(at)\" class=\"grid\"/>"
            svg +=
                "<text x=\"\(Self.n(left - 6))\" y=\"\(at)\" class=\"y-tick\">\(LoadPage.escaped(yFormat(tick)))</text>\n"
        }
        for (value, label) in xTicks(from: xLow, to: xHigh) {
            let at = Self.n(left + (value - xLow) / (xHigh - xLow) * plotWidth)
            svg +=
                "<line x1=\"\(at)\" x2=\"\(at)\" y1=\"\(Self.n(top + plotHeight))\" y2=\"\(Self.n(top + plotHeight + 4))\" class=\"axis\"/>"
            svg += "<text x=\"\(at)\" y=\"\(Self.n(top + plotHeight + 17))\" class=\"x-tick\">\(label)</text>\n"
        }
        svg += "<line x1=\"\(Self.n(left))\" x2=\"\(Self.n(width - right))\" y1=\"\(Self.n(top + plotHeight))\" "
        svg += "y2=\"\(Self.n(top + plotHeight))\" class=\"axis\"/>\n"
        svg += "<text x=\"\(Self.n(left + plotWidth / 2))\" y=\"\(Self.n(height - 6))\" class=\"x-label\">"
        svg += "\(LoadPage.escaped(xLabel))</text>\n"
        svg += "<text transform=\"translate(14 \(Self.n(top + plotHeight / 2))) rotate(-90)\" class=\"y-label\">"
        svg += "\(LoadPage.escaped(yLabel))</text>\n"
        for (order, item) in series.enumerated() {
            switch item.style {
            case .bars:
                var previous = xLow
                for point in item.points {
                    let (from, to) = (left + (previous - xLow) / (xHigh - xLow) * plotWidth, x(point.x))
                    previous = position(point.x)
                    guard point.y > 0 else { continue }
                    svg += "<rect x=\"\(Self.n(from + 0.5))\" y=\"\(Self.n(y(point.y)))\" "
                    svg +=
                        "width=\"\(Self.n(Swift.max(1, to - from - 1)))\" height=\"\(Self.n(top + plotHeight - y(point.y)))\" "
                    svg +=
                        "fill=\"\(item.colour)\"><title>\(LoadPage.escaped(item.name)): \(Self.short(point.y))</title></rect>\n"
                }
            case .line:
                let path = item.points.map { "\(Self.n(x($0.x))),\(Self.n(y($0.y)))" }.joined(separator: " ")
                svg += "<polyline points=\"\(path)\" fill=\"none\" stroke=\"\(item.colour)\" "
                svg += "stroke-width=\"\(Self.n(lineWidth(order)))\" "
                svg += "stroke-linejoin=\"round\"><title>\(LoadPage.escaped(item.name))</title></polyline>\n"
                if item.points.count <= 40 {
                    for point in item.points {
                        svg +=
                            "<circle cx=\"\(Self.n(x(point.x)))\" cy=\"\(Self.n(y(point.y)))\" r=\"3.5\" fill=\"\(item.colour)\"/>"
                    }
                    svg += "\n"
                }
            }
        }
        // The legend, when there is more than one series.
        if series.count > 1 {
            var at = width - right
            for item in series.reversed() {
                at -= Double(item.name.count) * 7 + 30
                svg += "<rect x=\"\(Self.n(at))\" y=\"9\" width=\"12\" height=\"12\" fill=\"\(item.colour)\"/>"
                svg +=
                    "<text x=\"\(Self.n(at + 16))\" y=\"19\" class=\"legend\">\(LoadPage.escaped(item.name))</text>\n"
            }
        }
        return svg + "</svg>\n"
    }

    /// The width of the line of series `order`: each wider than the ones drawn over it, so that a
    /// line that runs under another (time to first byte under the total time of a small body) still
    /// shows on both sides of it.
    private func lineWidth(_ order: Int) -> Double {
        2 + 2 * Double(series.count - 1 - order)
    }

    /// Where `value` lies on the x axis, before scaling.
    private func position(_ value: Double) -> Double {
        switch xAxis {
        case .linear: value
        case .percentile: -log10(Swift.max(1e-4, 1 - Swift.min(value, 99.99) / 100))
        }
    }

    /// The x axis's ticks: round values, or the percentiles 0, 90, 99, 99.9 and 99.99.
    private func xTicks(from low: Double, to high: Double) -> [(Double, String)] {
        if xAxis == .percentile {
            return [(0, "0%"), (1, "90%"), (2, "99%"), (3, "99.9%"), (4, "99.99%")]
        }
        let step = Self.niceStep((high - low) / 8)
        var ticks: [(Double, String)] = []
        var value = (low / step).rounded(.up) * step
        while value <= high + step / 1000 {
            ticks.append((value, Self.short(value)))
            value += step
        }
        return ticks
    }

    /// 0 and the round steps up to `high` (five or so).
    static func ticks(upTo high: Double) -> [Double] {
        let step = niceStep(high / 5)
        return (0...Int((high / step).rounded(.down) + 0.5)).map { Double($0) * step }
    }

    /// The round number (1, 2 or 5 times a power of ten) nearest above `rough`.
    static func niceStep(_ rough: Double) -> Double {
        guard rough > 0, rough.isFinite else { return 1 }
        let power = pow(10, (log10(rough)).rounded(.down))
        for multiple in [1.0, 2, 5, 10] where multiple * power >= rough * 0.999 { return multiple * power }
        return 10 * power
    }

    /// The smallest multiple of a round step at or above `value`: the top of a y axis.
    static func niceCeiling(_ value: Double) -> Double {
        guard value > 0, value.isFinite else { return 1 }
        let step = niceStep(value / 5)
        return (value / step).rounded(.up) * step
    }

    /// A tick's label: at most three significant digits, no trailing zeros.
    static func short(_ value: Double) -> String {
        if value == 0 { return "0" }
        let magnitude = abs(value)
        let digits =
            magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : Int(-log10(magnitude).rounded(.down)) + 3
        var text = Format.decimals(value, Swift.min(digits, 9))
        if text.contains(".") {
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
        }
        return text
    }

    /// A coordinate with one decimal.
    static func n(_ value: Double) -> String { Format.decimals(value, 1) }
}
