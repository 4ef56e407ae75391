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
            The URLs are taken in turn; each download's body is counted and thrown away. A failed \
            download is counted with its status or its error, and the next one starts: no retry \
            unless --retries asks. At the end, a summary, the percentiles of the time to first byte \
            and of the whole download, libcurl's phases, every status the servers answered and the \
            errors in their words (--json: one object). Exits 0 once the run is over, whatever the \
            servers answered.
            """
    )

    @Argument(help: "The URLs to download (http:// or https://), taken in turn.")
    var urls: [String] = []

    @Option(
        name: [.customShort("i", allowingJoined: true), .long],
        help: "Also take the URLs of FILE (haul -i's form: a URL a line, header= lines under it), in turn."
    )
    var inputFile: String?

    @Option(name: [.customShort("n"), .long], help: "How many downloads in all (default: 200 without -z).")
    var requests: Int?

    @Option(name: [.customShort("z"), .long], help: "Download for this many seconds instead of -n.")
    var duration: Seconds?

    @Option(name: [.customShort("c"), .long], help: "How many downloads run at once.")
    var concurrency: Int = 50

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Start this many downloads per second, however long the others take (the open model).",
            discussion: """
                Each download's latency then counts from when it was due to start, beside its service \
                time: a server that stalls cannot hide the downloads that waited behind it. -c caps the \
                downloads in flight; the others wait their turn, and their wait counts.
                """
        )
    )
    var rate: Double?

    @Option(name: .long, help: "With --rate: rise from 0 to the rate over this many seconds first.")
    var ramp: Seconds?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Retry a failed download up to N times, with back-off, resuming its body.",
            discussion: """
                Off by default: a load test counts each failure and goes on (as hey and wrk do). With \
                retries, a download is counted once, as it ended; the status table still counts \
                every answer, the retried ones included.
                """,
            valueName: "n"
        )
    )
    var retries: Int = 0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "When standard error is not a terminal, write how the run goes to it every this many seconds (0: never).",
            discussion: "On a terminal, one line redrawn twice a second instead (0 hides it too)."
        )
    )
    var progressInterval: Seconds = Seconds(5)

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A condition the run must meet, else haul exits 99 (repeatable): p99<500ms, ttfb.p95<100ms, errors<1%, rps>1000.",
            discussion: "Times: total (the default), ttfb, latency (with --rate); p50…p999, mean, min, max; us, ms, s."
        )
    )
    var threshold: [LoadThreshold] = []

    @Flag(name: .long, help: "Print the report as one JSON object on standard output (see docs/json.md).")
    var json = false

    @Option(
        name: [.customShort("o"), .long],
        help: ArgumentHelp(
            "Keep the bodies: each download's file goes into FOLDER as N-NAME (N: its number in the run, from 0).",
            discussion:
                "Without it, each body is counted and thrown away. Files are written as haul writes them: whole, by rename.",
            valueName: "folder"
        )
    )
    var output: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Also write the report as one HTML page to FILE: tables and plots, nothing fetched.",
            valueName: "file.html"
        )
    )
    var report: String?

    /// Headers, cookies, users and passwords, as haul's.
    @OptionGroup(title: "Credentials and headers (sent to each URL's origin only)")
    var access: AccessOptions

    /// Timeouts, redirects, the proxy, TLS, bandwidth, as haul's.
    @OptionGroup(title: "Network")
    var network: NetworkOptions

    func validate() throws {
        if urls.isEmpty, inputFile == nil { throw ValidationError("Give at least one URL, or -i FILE.") }
        if let requests, requests < 1 { throw ValidationError("--requests must be at least 1.") }
        if let duration, !(duration.value > 0) { throw ValidationError("--duration must be more than 0 seconds.") }
        if requests != nil, duration != nil { throw ValidationError("-n and -z: give one.") }
        if concurrency < 1 { throw ValidationError("--concurrency must be at least 1.") }
        if retries < 0 { throw ValidationError("--retries must be 0 or more.") }
        if progressInterval.value < 0 { throw ValidationError("--progress-interval must be 0 or more seconds.") }
        if let rate, !(rate > 0 && rate <= 1_000_000) { throw ValidationError("--rate must be more than 0.") }
        if let ramp {
            if rate == nil { throw ValidationError("--ramp needs --rate.") }
            if !(ramp.value > 0) { throw ValidationError("--ramp must be more than 0 seconds.") }
        }
    }

    func run() async throws {
        throw ExitCode(await load())
    }

    private func load() async -> Int32 {
        var configuration = DownloadManager.Configuration()
        configuration.maxConcurrentDownloads = concurrency
        // Failures are data: counted as they come, the next download started (issue 77).
        configuration.retryLimit = retries
        access.apply(to: &configuration)
        network.apply(to: &configuration)
        var targets: [Target] = []
        let manager: DownloadManager
        do {
            let credentials = try access.credentials()
            var entries = urls.map { InputFile.Entry(urls: [$0]) }
            if let inputFile { entries += try Self.entries(of: inputFile) }
            if entries.isEmpty { throw CLIError("\(inputFile ?? "the input") holds no URL.") }
            // Each URL checked now (http(s), a host, what curl parses): a bad one ends the run before it starts.
            for entry in entries {
                let url = try DownloadRequest.checkedURL(try Runner.resolved(entry.urls[0], credentials))
                targets.append(
                    Target(
                        url: url,
                        headers: entry.headers,
                        name: DownloadRequest.fileName(fromURL: url.absoluteString)
                    )
                )
            }
            if let output {
                try Self.makeFolder(output)
                // A journal of the run's own, removed at its end: a download is fetched again on each
                // run, not found complete from the last one; its file replaces the last run's.
                let state = URL(fileURLWithPath: output).appendingPathComponent(".haul-load-\(getpid())")
                try? FileManager.default.removeItem(at: state)
                configuration.stateDirectory = state
                configuration.resumesUnfinishedDownloads = false
                configuration.recognizesPlacedFiles = false
            }
            manager = try DownloadManager(configuration: configuration)
        } catch {
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            return ExitStatus.of(error)
        }
        let recorder = Recorder()
        let inFlight = InFlight()
        let started = Date.now
        // The open model stops on its schedule (the last download due within -z), not on the clock.
        let plan = Plan(
            targets: targets,
            folder: output.map { URL(fileURLWithPath: $0, isDirectory: true) },
            count: duration == nil ? requests ?? 200 : nil,
            deadline: rate == nil ? deadline : nil
        )
        // Ctrl-C, SIGTERM or SIGHUP: no download starts after it, those in flight stop uncounted, and
        // the report of what ended is printed (as hey does); the run then exits 128 + the signal.
        let interruption = Interruption {
            plan.stop()
            recorder.stopped.store(true, ordering: .relaxed)
            Task { await manager.shutdown() }
        }
        interruption.install()
        // How the run goes: on a terminal, a line redrawn twice a second; elsewhere a line every
        // --progress-interval seconds, so that a dead target does not look like a hung run.
        let scheduled = rate != nil
        let onTerminal = isatty(STDERR_FILENO) == 1
        let live =
            progressInterval.value > 0
            ? Task {
                await LoadText.live(
                    recorder,
                    since: .now,
                    scheduled: scheduled,
                    every: onTerminal ? .milliseconds(500) : progressInterval.duration,
                    redrawn: onTerminal
                )
            } : nil
        // The end of a timed run (-z): what is still in flight is stopped then, and counted apart
        // (an open model's downloads due before it still start, however late, and stop at once).
        let runStart = ContinuousClock.now
        let timer = duration.map { duration in
            Task {
                guard (try? await Task.sleep(until: runStart + duration.duration, clock: .continuous)) != nil else {
                    return
                }
                recorder.ranOut.store(true, ordering: .relaxed)
                if rate == nil { plan.stop() }
                inFlight.stopAll()
            }
        }
        if let rate {
            let schedule = Schedule(rate: rate, ramp: ramp?.value ?? 0, duration: duration?.value)
            await Self.open(plan, on: schedule, from: runStart, with: manager, into: recorder, inFlight: inFlight)
        } else {
            await Self.closed(plan, concurrency: concurrency, with: manager, into: recorder, inFlight: inFlight)
        }
        timer?.cancel()
        live?.cancel()
        await live?.value
        await manager.shutdown()
        if let state = configuration.stateDirectory { try? FileManager.default.removeItem(at: state) }
        let result = recorder.report.withLock { $0 }
        let ranOut = recorder.ranOut.load(ordering: .relaxed)
        if json {
            Reporter.write(LoadText.json(result), to: STDOUT_FILENO)
        } else {
            Reporter.write(LoadText.report(result, stoppedAtEnd: ranOut), to: STDOUT_FILENO)
        }
        var status = ExitStatus.success
        if let signal = interruption.received {
            let stopped = recorder.started.load(ordering: .relaxed) - result.requests
            Reporter.write(
                "haul: stopped by a signal: the report counts the \(result.requests) downloads that ended; "
                    + "\(stopped) in flight were stopped and are not in it\n",
                to: STDERR_FILENO
            )
            status = 128 + signal
        }
        if let path = report {
            let run = LoadPage.Run(
                urls: targets.map { DownloadRequest.redacted($0.url) },
                concurrency: concurrency,
                rate: rate,
                ramp: ramp?.value,
                started: started
            )
            do {
                try Self.write(LoadPage.html(result, run: run), to: path)
            } catch {
                Reporter.write("haul: --report: \(error)\n", to: STDERR_FILENO)
                status = ExitStatus.localFiles
            }
        }
        for condition in threshold {
            let passed = condition.check(result).passed
            if !passed, interruption.received == nil { status = 99 }
            // On standard error: --json's standard output stays one object.
            Reporter.write("haul: threshold \(condition.verdict(result))\n", to: STDERR_FILENO)
        }
        return status
    }

    /// Writes `page` to `path` whole or not at all: a temporary file beside it, renamed over it.
    private static func write(_ page: String, to path: String) throws {
        let temporary = path + ".haul-\(getpid()).tmp"
        let descriptor = Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw CLIError("'\(path)' cannot be written: \(String(cString: strerror(errno))).")
        }
        var bytes = Array(page.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                unlink(temporary)
                throw CLIError("'\(path)' cannot be written: \(reason).")
            }
            bytes = bytes.dropFirst(written)
        }
        close(descriptor)
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw CLIError("'\(path)' cannot be written: \(reason).")
        }
    }

    /// Makes `path` a folder (and those above it) unless it is one.
    private static func makeFolder(_ path: String) throws {
        var isFolder: Bool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
            guard isFolder else { throw CLIError("-o: '\(path)' is not a folder.", exitStatus: ExitStatus.localFiles) }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw CLIError("-o: the folder '\(path)' cannot be made: \(error).", exitStatus: ExitStatus.localFiles)
        }
    }

    /// The entries of the input file at `path` (`-`: standard input).
    private static func entries(of path: String) throws -> [InputFile.Entry] {
        var text = ""
        if path == "-" {
            while let line = readLine(strippingNewline: false) { text += line }
        } else {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CLIError("-i: '\(path)' cannot be read.", exitStatus: ExitStatus.localFiles)
            }
            text = String(decoding: data, as: UTF8.self)
        }
        return try InputFile.parse(text).entries
    }

    /// When a run with --duration ends.
    private var deadline: ContinuousClock.Instant? { duration.map { .now + $0.duration } }

}
