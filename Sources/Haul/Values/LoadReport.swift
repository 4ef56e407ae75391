import FoundationEssentials

/// What a load test measured, fed with each download's outcome and ``DownloadTimings`` as it ends,
/// in constant memory whatever the count (the latencies in ``PercentileHistogram``s, the run in one
/// entry per second). `haul load` makes one; a test harness that drives downloads through the
/// library can too:
///
/// ```swift
/// var report = LoadReport()
/// for download in downloads {
///     do {
///         _ = try await download.finished()
///         report.record(download.timings, outcome: .completed)
///     } catch let error as DownloadError {
///         report.record(download.timings, outcome: .failed(error))
///     }
/// }
/// print(report.total.value(atPercentile: 99), report.requestsPerSecond)
/// ```
///
/// Times are nanoseconds in the histograms. A download's service time is its ``DownloadTimings/total``
/// (first request to end); with a schedule (an open model), its latency runs from when it was due to
/// start, so that a server that stalls cannot hide the downloads that waited behind it (what wrk2
/// calls coordinated omission).
public struct LoadReport: Sendable {
    /// How a download ended.
    public enum Outcome: Sendable, Hashable {
        /// Its file (or body) is whole.
        case completed
        /// It failed with this error (after its retries).
        case failed(DownloadError)
        /// It was cancelled, or its manager shut down.
        case cancelled
    }

    /// One second of the run (from ``start``): what began and ended in it, and what was in flight.
    public struct Second: Sendable, Hashable, Codable {
        /// Which second of the run: 0 for the first.
        public var second = 0
        /// Downloads whose first request went out in this second (a download that made none: where
        /// it ended).
        public var started = 0
        /// Downloads that completed in this second.
        public var completed = 0
        /// Downloads that failed in this second.
        public var failed = 0
        /// Body bytes of the downloads that ended in this second.
        public var bytes: Int64 = 0
        /// Downloads in flight (first request made, not ended) on average over this second: the time
        /// each spent in flight within it, added up, in seconds (Little's law's mean).
        public var inFlight = 0.0
        /// The median and the 99th percentile of the service time (``DownloadTimings/total``) of the
        /// downloads that completed in this second, in seconds, each within 6 % (`nil` when none did).
        public var p50, p99: Double?
    }

    /// A failure in its words, with how many downloads ended with it: the server's host and port,
    /// then the error's ``DownloadError/cause`` (as the first of them said it).
    public struct ErrorMessage: Sendable, Hashable, Codable {
        /// `127.0.0.1:8080: Couldn't connect to server (curl error 7)`.
        public var message: String
        /// How many downloads failed with it.
        public var count: Int
    }

    /// Distinct error messages kept; past them, failures are counted under one more entry.
    public static let distinctMessages = 100

    /// What a load tester reads of a histogram: min, mean, the usual percentiles and max, each
    /// divided by `unit` (10⁹ for nanoseconds as seconds).
    public struct Percentiles: Sendable, Hashable, Codable {
        /// The smallest value.
        public var min: Double
        /// The mean.
        public var mean: Double
        /// The median.
        public var p50: Double
        /// The 90th percentile.
        public var p90: Double
        /// The 95th percentile.
        public var p95: Double
        /// The 99th percentile.
        public var p99: Double
        /// The 99.9th percentile.
        public var p999: Double
        /// The largest value.
        public var max: Double

        /// Of `histogram`, in units of `unit`.
        public init(_ histogram: PercentileHistogram, unit: Double = 1) {
            func at(_ percentile: Double) -> Double { Double(histogram.value(atPercentile: percentile)) / unit }
            (min, mean, max) = (Double(histogram.min) / unit, histogram.mean / unit, Double(histogram.max) / unit)
            (p50, p90, p95, p99, p999) = (at(50), at(90), at(95), at(99), at(99.9))
        }
    }

    /// The bodies whose throughput is measured: those of at least this many bytes (1 MiB).
    public static let throughputFloor: Int64 = 1024 * 1024

    /// When the run started: seconds are counted from here.
    public let start: ContinuousClock.Instant
    /// When the last download recorded ended (``start`` before any).
    public private(set) var end: ContinuousClock.Instant
    /// Downloads recorded.
    public private(set) var requests = 0
    /// Downloads that completed.
    public private(set) var completed = 0
    /// Downloads that failed.
    public private(set) var failed = 0
    /// Downloads that were cancelled.
    public private(set) var cancelled = 0
    /// Body bytes received, over every download recorded.
    public private(set) var bytes: Int64 = 0
    /// Time to first byte of the completed downloads (``DownloadTimings/timeToFirstByte``).
    public private(set) var timeToFirstByte = PercentileHistogram()
    /// Service time of the completed downloads: first request to end (``DownloadTimings/total``).
    public private(set) var total = PercentileHistogram()
    /// From when each completed download was due to start (its schedule's instant) to its end: only
    /// the downloads recorded with one.
    public private(set) var latency = PercentileHistogram()
    /// Each completed body's bytes per second, for bodies of at least ``throughputFloor``.
    public private(set) var throughput = PercentileHistogram()
    /// The first answered request's name lookup (``DownloadTimings/Phases``), of the downloads
    /// that opened a connection (over a reused one, libcurl says 0: a load test that reuses its
    /// connections would show a median of 0); the phases are each measured from the request's start.
    public private(set) var nameLookup = PercentileHistogram()
    /// Its connection made (TCP), of the downloads that opened one.
    public private(set) var connect = PercentileHistogram()
    /// Its TLS handshake done: https only, of the downloads that opened a connection.
    public private(set) var tls = PercentileHistogram()
    /// Its answer's first byte, of every download that had an answer.
    public private(set) var firstByte = PercentileHistogram()
    /// Every answer's status, counted by status: the last of each download that had one, and the
    /// answers before it (``DownloadTimings/earlierStatuses``: a retried `503`, the segments' `206`s).
    public private(set) var statusCodes: [Int: Int] = [:]
    /// Failures by class.
    public private(set) var errors: [DownloadError.Category: Int] = [:]
    /// Failures by their words (``ErrorMessage``), most frequent first; the same order for a tie
    /// as they first came. At most ``distinctMessages``, then one entry that counts the rest.
    public var errorMessages: [ErrorMessage] {
        var messages = messageCounts
        if otherMessages > 0 {
            messages.append(
                ErrorMessage(message: "(other messages, past \(Self.distinctMessages))", count: otherMessages)
            )
        }
        return messages.enumerated().sorted { ($0.element.count, $1.offset) > ($1.element.count, $0.offset) }.map(
            \.element
        )
    }
    /// Distinct messages in the order they first came, and where each is by its key.
    private var messageCounts: [ErrorMessage] = []
    private var messageIndex: [String: Int] = [:]
    private var otherMessages = 0
    /// Connections opened.
    public private(set) var connectionsOpened = 0
    /// Requests that went over a connection already open.
    public private(set) var connectionsReused = 0
    /// The run, second by second from ``start``, up to the last download's end.
    public var timeline: [Second] {
        var spanning = 0
        return seconds.indices.map { index in
            spanning += spanningChange[index]
            var second = seconds[index]
            second.second = index
            second.inFlight += Double(spanning)
            let times = secondTimes[index]
            if times.count > 0 {
                second.p50 = Double(times.value(atPercentile: 50)) / 1e9
                second.p99 = Double(times.value(atPercentile: 99)) / 1e9
            }
            return second
        }
    }
    /// The service times of each second's completed downloads (nanoseconds), coarse: a run of an
    /// hour keeps 3,600 of them.
    private var secondTimes: [PercentileHistogram] = []
    /// What ended in each second, and the time downloads spent in flight in it, but for the seconds
    /// they spanned whole (``spanningChange``).
    private var seconds: [Second] = []
    /// Downloads in flight over a whole second, counted where they begin to be (+1) and where they stop
    /// (−1): what ``timeline`` adds up (one entry longer than ``seconds``).
    private var spanningChange: [Int] = [0]

    /// A report of a run that starts at `start`.
    public init(start: ContinuousClock.Instant = .now) {
        self.start = start
        self.end = start
    }

    /// The run's length so far: from its start to the last download's end.
    public var duration: Duration { end - start }
    /// Downloads that ended (completed or failed) per second of the run.
    public var requestsPerSecond: Double { Self.rate(Double(completed + failed), over: duration) }
    /// Body bytes per second of the run.
    public var bytesPerSecond: Double { Self.rate(Double(bytes), over: duration) }

    /// The report's figures as one value, for `--json` and other machine readers: times in seconds,
    /// throughput in bytes per second, status codes and error classes by name.
    public struct Summary: Sendable, Hashable, Codable {
        /// Downloads recorded, completed, failed and cancelled.
        public var requests, completed, failed, cancelled: Int
        /// The run's length in seconds, and downloads ended per second.
        public var seconds, requestsPerSecond: Double
        /// Body bytes received.
        public var bytes: Int64
        /// Body bytes per second of the run.
        public var bytesPerSecond: Double
        /// Time to first byte and service time of the completed downloads, in seconds.
        public var timeToFirstByte, total: Percentiles
        /// From each download's scheduled start to its end, in seconds (an open model's runs only).
        public var latency: Percentiles?
        /// Bytes per second of each completed body of 1 MiB or more (none: `nil`).
        public var throughput: Percentiles?
        /// The first answered request's phases, in seconds from its start: name lookup and connect
        /// of the downloads that opened a connection, first byte of all.
        public var nameLookup, connect, firstByte: Percentiles
        /// The TLS handshakes measured, in seconds from the request's start (none: `nil`).
        public var tls: Percentiles?
        /// The last answer's status of each download, counted by status ("200").
        public var statusCodes: [String: Int]
        /// Failures counted by class (``DownloadError/Category``: "httpStatus", "connection"…).
        public var errors: [String: Int]
        /// Failures counted by their words, most frequent first (``LoadReport/errorMessages``).
        public var errorMessages: [ErrorMessage]
        /// The run second by second (``LoadReport/timeline``).
        public var series: [Second]
        /// Connections opened, and requests over one already open.
        public var connectionsOpened, connectionsReused: Int
    }

    /// The report's figures now (``Summary``).
    public var summary: Summary {
        func seconds(_ histogram: PercentileHistogram) -> Percentiles { Percentiles(histogram, unit: 1e9) }
        func optional(_ histogram: PercentileHistogram, unit: Double) -> Percentiles? {
            histogram.count == 0 ? nil : Percentiles(histogram, unit: unit)
        }
        return Summary(
            requests: requests,
            completed: completed,
            failed: failed,
            cancelled: cancelled,
            seconds: duration.inSeconds,
            requestsPerSecond: requestsPerSecond,
            bytes: bytes,
            bytesPerSecond: bytesPerSecond,
            timeToFirstByte: seconds(timeToFirstByte),
            total: seconds(total),
            latency: optional(latency, unit: 1e9),
            throughput: optional(throughput, unit: 1),
            nameLookup: seconds(nameLookup),
            connect: seconds(connect),
            firstByte: seconds(firstByte),
            tls: optional(tls, unit: 1e9),
            statusCodes: Dictionary(uniqueKeysWithValues: statusCodes.map { ("\($0.key)", $0.value) }),
            errors: Dictionary(uniqueKeysWithValues: errors.map { ("\($0.key)", $0.value) }),
            errorMessages: errorMessages,
            series: timeline,
            connectionsOpened: connectionsOpened,
            connectionsReused: connectionsReused
        )
    }

    /// Records a download that ended at `end` with `outcome` and `timings`; `scheduledAt`: when it was
    /// due to start (an open model's schedule), for its ``latency``.
    public mutating func record(
        _ timings: DownloadTimings,
        outcome: Outcome,
        scheduledAt: ContinuousClock.Instant? = nil,
        end: ContinuousClock.Instant = .now
    ) {
        requests += 1
        bytes += timings.bytes
        connectionsOpened += timings.connectionsOpened
        connectionsReused += timings.connectionsReused
        if let status = timings.status { statusCodes[status, default: 0] += 1 }
        for status in timings.earlierStatuses { statusCodes[status, default: 0] += 1 }
        if let phases = timings.phases {
            if timings.connectionsOpened > 0 {
                nameLookup.record(phases.nameLookup.nanoseconds)
                connect.record(phases.connect.nanoseconds)
                if let handshake = phases.tls { tls.record(handshake.nanoseconds) }
            }
            firstByte.record(phases.firstByte.nanoseconds)
        }
        let ended = Swift.max(0, (end - start).inSeconds)
        let second = Int(ended)
        grow(to: second)
        seconds[second].bytes += timings.bytes
        switch outcome {
        case .completed:
            completed += 1
            seconds[second].completed += 1
            if let firstByte = timings.timeToFirstByte { timeToFirstByte.record(firstByte.nanoseconds) }
            if let service = timings.total {
                total.record(service.nanoseconds)
                secondTimes[second].record(service.nanoseconds)
                if timings.bytes >= Self.throughputFloor, service > .zero {
                    throughput.record(UInt64(Double(timings.bytes) / service.inSeconds))
                }
            }
            if let scheduledAt { latency.record((end - scheduledAt).nanoseconds) }
        case .failed(let error):
            failed += 1
            seconds[second].failed += 1
            errors[error.category, default: 0] += 1
            count(error)
        case .cancelled:
            cancelled += 1
        }
        // In flight from its first request to its end: its time in its first and last seconds, and
        // the whole seconds between.
        let began = (end - (timings.total ?? .zero) - start).inSeconds
        let from = Swift.min(ended, Swift.max(0, began))
        let first = Swift.min(second, Int(from))
        seconds[first].started += 1
        if first == second {
            seconds[second].inFlight += ended - from
        } else {
            seconds[first].inFlight += Double(first + 1) - from
            seconds[second].inFlight += ended - Double(second)
            spanningChange[first + 1] += 1
            spanningChange[second] -= 1
        }
        if end > self.end { self.end = end }
    }

    /// Adds seconds to the run until `second` is in it.
    private mutating func grow(to second: Int) {
        guard second >= seconds.count else { return }
        secondTimes.append(
            contentsOf: repeatElement(PercentileHistogram(subBits: 3), count: second + 1 - seconds.count)
        )
        seconds.append(contentsOf: repeatElement(Second(), count: second + 1 - seconds.count))
        spanningChange.append(contentsOf: repeatElement(0, count: second + 2 - spanningChange.count))
    }

    /// Counts `error` under its words: its server's host and port and its cause. Two messages that
    /// differ only in their numbers (curl's "after 3 ms") and have the same code, status, curl code
    /// and `errno` are one.
    private mutating func count(_ error: DownloadError) {
        let server = error.url.flatMap(Self.hostAndPort) ?? "-"
        let cause = error.cause
        let masked = cause.split(whereSeparator: \.isNumber).joined(separator: "#")
        let key = [
            server, error.code.description, error.httpStatus.map(String.init) ?? "",
            error.curlCode.map(String.init) ?? "",
            error.errno.map(String.init) ?? "", masked,
        ].joined(separator: "\u{1}")
        if let index = messageIndex[key] {
            messageCounts[index].count += 1
        } else if messageCounts.count < Self.distinctMessages {
            messageIndex[key] = messageCounts.count
            messageCounts.append(ErrorMessage(message: "\(server): \(cause)", count: 1))
        } else {
            otherMessages += 1
        }
    }

    /// `host:port` of `url` (the scheme's port when it names none; an IPv6 address in brackets).
    static func hostAndPort(_ url: String) -> String? {
        guard let url = URL(string: url), let host = url.host?.lowercased(), !host.isEmpty else { return nil }
        let shown = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(shown):\(url.portOrDefault)"
    }

    static func rate(_ count: Double, over duration: Duration) -> Double {
        let length = duration.inSeconds
        return length > 0 ? count / length : 0
    }
}
