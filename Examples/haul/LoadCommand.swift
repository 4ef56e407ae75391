import ArgumentParser
import FoundationEssentials
import Glibc
import Haul
import Synchronization

/// `haul load -n N -c C URL…`: downloads the URLs over and over, C at once, and reports what it
/// cost (issue 60). The bodies are counted and thrown away. This is the closed model: a download
/// starts when one ends, N in all or for a duration.
struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Download URLs many times over, some at once, and report the times: a load test.",
        usage: "haul load [-n <requests> | -z <seconds>] [-c <concurrency>] [<options>] <url> ...",
        discussion: """
            The URLs are taken in turn; each download's body is counted and thrown away. At the end, \
            a summary, the percentiles of the time to first byte and of the whole download, libcurl's \
            phases, the status codes and the errors (--json: one object). Exits 0 once the run is \
            over, whatever the servers answered.
            """
    )

    @Argument(help: "The URLs to download (http:// or https://), taken in turn.")
    var urls: [String] = []

    @Option(name: [.customShort("n"), .long], help: "How many downloads in all (default: 200 without -z).")
    var requests: Int?

    @Option(name: [.customShort("z"), .long], help: "Download for this many seconds instead of -n.")
    var duration: Seconds?

    @Option(name: [.customShort("c"), .long], help: "How many downloads run at once.")
    var concurrency: Int = 50

    @Flag(name: .long, help: "Print the report as one JSON object on standard output (see docs/json.md).")
    var json = false

    /// Headers, cookies, users and passwords, as haul's.
    @OptionGroup(title: "Credentials and headers (sent to each URL's origin only)")
    var access: AccessOptions

    /// Timeouts, redirects, the proxy, TLS, bandwidth, as haul's.
    @OptionGroup(title: "Network")
    var network: NetworkOptions

    func validate() throws {
        if urls.isEmpty { throw ValidationError("Give at least one URL.") }
        if let requests, requests < 1 { throw ValidationError("--requests must be at least 1.") }
        if let duration, !(duration.value > 0) { throw ValidationError("--duration must be more than 0 seconds.") }
        if requests != nil, duration != nil { throw ValidationError("-n and -z: give one.") }
        if concurrency < 1 { throw ValidationError("--concurrency must be at least 1.") }
    }

    func run() async throws {
        throw ExitCode(await load())
    }

    private func load() async -> Int32 {
        var configuration = DownloadManager.Configuration()
        configuration.maxConcurrentDownloads = concurrency
        access.apply(to: &configuration)
        network.apply(to: &configuration)
        let targets: [URL]
        let manager: DownloadManager
        do {
            let credentials = try access.credentials()
            // Each URL checked now (http(s), a host, what curl parses): a bad one ends the run before it starts.
            targets = try urls.map { text throws(DownloadError) in
                try DownloadRequest.checkedURL(try Runner.resolved(text, credentials))
            }
            manager = try DownloadManager(configuration: configuration)
        } catch {
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            return ExitStatus.of(error)
        }
        let plan = Plan(targets: targets, count: duration == nil ? requests ?? 200 : nil, deadline: deadline)
        let report = Recorder()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<min(concurrency, plan.count ?? concurrency) {
                group.addTask {
                    while let url = plan.next() {
                        await Self.fetch(url, with: manager, into: report)
                    }
                }
            }
        }
        await manager.shutdown()
        let result = report.report.withLock { $0 }
        if json {
            Reporter.write(LoadText.json(result), to: STDOUT_FILENO)
        } else {
            Reporter.write(LoadText.report(result), to: STDOUT_FILENO)
        }
        return 0
    }

    /// When a run with --duration ends.
    private var deadline: ContinuousClock.Instant? { duration.map { .now + $0.duration } }

    /// Downloads `url` once, its body thrown away, and records how it went.
    private static func fetch(_ url: URL, with manager: DownloadManager, into recorder: Recorder) async {
        let download: Download
        do {
            download = try manager.download(DownloadRequest.discarding(url))
        } catch {
            let refused =
                error as? DownloadError
                ?? DownloadError(code: .internalError, url: url.redactedString, detail: "\(error)")
            recorder.report.withLock { $0.record(DownloadTimings(), outcome: .failed(refused)) }
            return
        }
        let outcome: LoadReport.Outcome
        do {
            _ = try await download.finished()
            outcome = .completed
        } catch let error as DownloadError {
            outcome = error.code == .cancelled ? .cancelled : .failed(error)
        } catch {
            outcome = .cancelled
        }
        let timings = download.timings
        recorder.report.withLock { $0.record(timings, outcome: outcome) }
    }

    /// The run's report, which every download's task adds to.
    final class Recorder: Sendable {
        let report = Mutex(LoadReport())
    }

    /// Which URL the next download takes, and whether the run goes on: the URLs in turn, `count`
    /// downloads in all or until `deadline`. Any task.
    final class Plan: Sendable {
        let targets: [URL]
        let count: Int?
        let deadline: ContinuousClock.Instant?
        private let started = Atomic<Int>(0)

        init(targets: [URL], count: Int?, deadline: ContinuousClock.Instant?) {
            (self.targets, self.count, self.deadline) = (targets, count, deadline)
        }

        /// The next download's URL, or `nil` once the run is over.
        func next() -> URL? {
            if let deadline, ContinuousClock.now >= deadline { return nil }
            let index = started.add(1, ordering: .relaxed).oldValue
            if let count, index >= count { return nil }
            return targets[index % targets.count]
        }
    }
}
