import Dispatch
import FoundationEssentials
import Glibc
import Haul
import Logging

/// Runs one `haul` invocation and returns its exit status.
struct Runner {
    let command: HaulCommand

    /// What a run starts from: the list of URLs, the output folder (made), the credentials.
    struct Start {
        let source: EntrySource
        let directory: String
        let credentials: Credentials
    }

    /// Reads the credentials and the list, and makes the output folder (said when `-o` became a
    /// folder for several URLs).
    func start() throws -> Start {
        let credentials = try command.access.credentials()
        let source = try command.entrySource()
        let plan = DownloadPlan.resolve(
            output: command.outputPath,
            urlCount: source.count,
            isDirectory: Paths.isDirectory
        )
        let directory: String
        var link = stat()
        if let file = plan.file, lstat(file, &link) == 0, (link.st_mode & S_IFMT) == S_IFLNK,
            let target = Paths.linkTarget(of: file)
        {
            // The file is placed at the link's target: its partial is beside the target, on the
            // same file system, so that the rename into place is atomic.
            directory = DownloadPlan.resolve(output: target, urlCount: 1, isDirectory: Paths.isDirectory).directory
        } else {
            directory = plan.directory
        }
        let existed = Paths.isDirectory(directory)
        try Self.makeDirectory(directory)
        if !existed, plan.file == nil, command.inputFile == nil, let output = command.output,
            !output.hasSuffix("/"), !command.quiet, !command.json
        {
            // -o names a folder for several URLs: said, so that `-o name.iso URL1 URL2` does not
            // silently become a folder.
            Reporter.write(
                "haul: made the folder '\(output)' for \(source.count) URLs (-o names a folder when several "
                    + "URLs are given)\n",
                to: STDERR_FILENO
            )
        }
        return Start(source: source, directory: directory, credentials: credentials)
    }

    /// The manager's configuration for this run, its state directory beside `directory`.
    func configuration(besideFolder directory: String) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration()
        configuration.maxConcurrentDownloads = command.concurrency
        configuration.retryLimit = command.retries ?? 5
        // A wrong port or a host that is down fails at once, as with curl and wget, unless retries
        // were asked for.
        configuration.connectionRetryLimit = command.retries == nil ? 0 : nil
        if command.verbose {
            configuration.logsHeaders = true
            configuration.logger = Logger(label: "haul", factory: { _ in VerboseLog() })
        }
        // Validated by the command: read again on every run, never stored.
        command.access.apply(to: &configuration)
        command.network.apply(to: &configuration)
        command.files.apply(to: &configuration)
        configuration.revalidatesCompletedFiles = command.revalidate
        if command.writesThrough {
            // Nothing beside a device or FIFO: the library keeps a stream's row in a folder of its
            // own, for this run (unless --state names one).
            configuration.stateDirectory = command.state.map { URL(fileURLWithPath: $0, isDirectory: true) }
        } else {
            configuration.stateDirectory = URL(
                fileURLWithPath: command.state ?? DownloadManager.defaultStateDirectory(besideFolder: directory),
                isDirectory: true
            )
        }
        configuration.progressInterval = .milliseconds(command.json ? 200 : 100)
        // Only this command's URLs run; others in the journal stay as they are.
        configuration.resumesUnfinishedDownloads = false
        return configuration
    }

    func run() async -> Int32 {
        let start: Start
        do {
            start = try self.start()
        } catch {
            Reporter.write("haul: \(Self.describe(error))\n", to: STDERR_FILENO)
            return ExitStatus.of(error)
        }
        let (source, credentials) = (start.source, start.credentials)
        let configuration = configuration(besideFolder: start.directory)

        let manager: DownloadManager
        do {
            manager = try DownloadManager(configuration: configuration)
        } catch {
            Reporter.write("haul: \(Self.describe(error))\n", to: STDERR_FILENO)
            return ExitStatus.of(error)
        }
        let reporter = Reporter(mode: command.reporterMode, resumesInAnotherRun: !command.writesThrough)
        let interruption = Interruption(manager: manager)
        interruption.install()
        // -m/--max-time: the run stops then, as at Ctrl-C (bytes kept), with its own status.
        let timeLimit = command.maxTime.map { seconds in
            Task {
                try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
                interruption.expire()
            }
        }

        // The list becomes journal rows in large transactions (`enqueue`): no handle, task or loop
        // command per URL. Outcomes are followed by id on the manager's feed, subscribed before the
        // first row is written, so a download that ends before the list is in is seen too. What
        // stays is each download followed (its id's bits and its place in the list) until its outcome.
        let following = Following()
        reporter.expect(source.count)
        // Names are chosen once the journal is open (``JournalNames``), as the list is read.
        let requests = RequestList(
            self,
            source: source,
            credentials: credentials,
            names: JournalNames(manager: manager, continuesFile: command.continuesFile, replaces: command.force),
            following: following,
            reporter: reporter
        )
        // Why the list could not all be queued (its journal failed: a full disk), if it could not.
        var queueFailure: Int32?
        let outcome = await withTaskGroup(of: Void.self) { group -> Following.Outcome in
            await withCheckedContinuation { (subscribed: CheckedContinuation<Void, Never>) in
                group.addTask {
                    // Quiet or by outcome only: the loop makes no other event for the feed.
                    var events = (reporter.wantsEveryEvent ? manager.events : manager.outcomes).makeAsyncIterator()
                    subscribed.resume()
                    await Self.report(&events, following: following, reporter: reporter, source: source)
                }
            }
            do {
                let summary = try manager.enqueue(requests)
                for rejection in summary.rejected {
                    // Stopped before it was queued (a FIFO that waited for its reader): not a failure.
                    if interruption.isStopped, rejection.error.code == .shutdown { continue }
                    let request = rejection.request
                    guard let followed = following.followed(request.id) else { continue }
                    let item = DownloadPlan.Item(
                        url: source.url(at: followed.index) ?? DownloadRequest.redacted(request.url),
                        destination: followed.destination ?? request.destination.path
                    )
                    refuse(item, error: rejection.error, reporter: reporter)
                    requests.countFailure()
                    following.refused(request.id, index: followed.index)
                }
            } catch {
                // The manager shut down (a signal) or its journal failed: what was queued is kept.
                if !interruption.isStopped {
                    Reporter.write("haul: \(Self.describe(error))\n", to: STDERR_FILENO)
                    queueFailure = ExitStatus.of(error)
                }
            }
            if following.allQueued() { group.cancelAll() }
            // Once nothing is queued or running, every outcome this run will see is on the feed
            // (the loop hands a turn's events over before it tells idle waiters): the reader reads
            // what is left, then stops. A download left without an outcome (paused) ends as not
            // completed. Interrupted, the manager shuts down instead: every download reports its
            // pause, and the feed ends.
            await manager.waitUntilIdle()
            if !interruption.isStopped { group.cancelAll() }
            await group.waitForAll()
            return following.finish()
        }
        timeLimit?.cancel()
        await manager.shutdown()
        if let signal = interruption.received {
            reporter.finish(interrupted: true)
            return 128 + signal
        }
        if interruption.reachedTimeLimit {
            reporter.finish(interrupted: true, timeLimit: command.maxTime)
            return ExitStatus.timeLimit
        }
        reporter.finish(interrupted: false)
        guard requests.failures == 0, outcome.failed == 0, outcome.notCompleted == 0 else {
            // A download left without an outcome (paused) is no failure of a class; one never queued
            // has its queue's failure.
            if let queueFailure { return reporter.failureStatus(with: queueFailure) }
            return outcome.notCompleted > 0 ? ExitStatus.other : reporter.failureStatus
        }
        return ExitStatus.success
    }

    /// Reports the events of the downloads `following` follows until the last one ended (or the
    /// feed ends: the manager shut down).
    static func report(
        _ events: inout DownloadManagerEvents.AsyncIterator,
        following: Following,
        reporter: Reporter,
        source: EntrySource
    ) async {
        let everyEvent = reporter.wantsEveryEvent
        let showsURLs = reporter.showsURLs
        while let event = await events.next() {
            guard everyEvent || event.event.isFinal, let followed = following.followed(event.id) else { continue }
            let path = event.destinationPath
            reporter.report(
                event.event,
                index: followed.index,
                name: Paths.lastComponent(of: followed.destination ?? path),
                url: showsURLs ? Reporter.shown(source.url(at: followed.index) ?? "") : "",
                path: path,
                download: event.download
            )
            if following.ended(event) { return }
        }
    }

    /// Reports a URL of the list that could not be queued.
    /// A sentence about a file of the run (not a failure), to standard error unless --quiet.
    func note(_ sentence: String) {
        guard !command.quiet else { return }
        Reporter.write("haul: \(sentence)\n", to: STDERR_FILENO)
    }

    func refuse(_ item: DownloadPlan.Item, error: any Error, reporter: Reporter) {
        reporter.refused(error)
        if command.json {
            Reporter.write(
                JSONEvent.line(
                    for: .failed(
                        error as? DownloadError ?? DownloadError(code: .invalidURL, url: Reporter.shown(item.url))
                    ),
                    url: Reporter.shown(item.url),
                    path: URL(fileURLWithPath: item.destination).standardizedFileURL.path,
                    download: nil
                ),
                to: STDOUT_FILENO
            )
        }
        Reporter.write("haul: \(Self.describe(error))\n", to: STDERR_FILENO)
    }

    /// `mkdir -p` (the library's), with the folder and the system's reason in the error.
    static func makeDirectory(_ path: String) throws {
        guard let error = Paths.makeDirectories(path) else { return }
        throw CLIError(
            error == ENOTDIR
                ? "cannot use '\(path)' as the output folder: \(String(cString: strerror(ENOTDIR)))"
                : "cannot create the output folder '\(path)': \(String(cString: strerror(error)))",
            exitStatus: ExitStatus.localFiles
        )
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? DownloadError { return error.forCommandLine }
        if let error = error as? CLIError { return error.description }
        if let error = error as? CocoaError {
            let cause =
                (error.underlying as? POSIXError).map { String(cString: strerror($0.code.rawValue)) } ?? "\(error.code)"
            return error.filePath.map { "'\($0)': \(cause)" } ?? cause
        }
        return String(describing: error)
    }
}
