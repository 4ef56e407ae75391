import Dispatch
import FoundationEssentials
import Glibc
import Haul
import Logging

/// Runs one `haul` invocation and returns its exit status.
struct Runner {
    let command: HaulCommand

    func run() async -> Int32 {
        let source: EntrySource
        let directory: String
        let credentials: Credentials
        let isDirectory = { (path: String) -> Bool in
            var status = stat()
            return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
        }
        do {
            credentials = try command.access.credentials()
            source = try command.entrySource()
            let plan = DownloadPlan.resolve(
                output: command.outputPath,
                urlCount: source.count,
                isDirectory: isDirectory
            )
            var link = stat()
            if let file = plan.file, lstat(file, &link) == 0, (link.st_mode & S_IFMT) == S_IFLNK,
                let target = FilePath.linkTarget(of: file)
            {
                // The file is placed at the link's target: its partial is beside the target, on the
                // same file system, so that the rename into place is atomic.
                directory = DownloadPlan.resolve(output: target, urlCount: 1, isDirectory: isDirectory).directory
            } else {
                directory = plan.directory
            }
            let existed = isDirectory(directory)
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
        } catch {
            Reporter.write("haul: \(Self.describe(error))\n", to: STDERR_FILENO)
            return ExitStatus.of(error)
        }

        var configuration = DownloadManager.Configuration()
        configuration.maxConcurrentDownloads = command.concurrency
        configuration.bufferSize = Int(command.bufferSize.value)
        configuration.retryLimit = command.retries ?? 5
        // A wrong port or a host that is down fails at once, as with curl and wget, unless retries
        // were asked for.
        configuration.connectionRetryLimit = command.retries == nil ? 0 : nil
        configuration.stallTimeout = command.stallTimeout.duration
        if command.verbose {
            configuration.logsHeaders = true
            configuration.logger = Logger(label: "haul", factory: { _ in VerboseLog() })
        }
        if let seconds = command.connectTimeout { configuration.connectTimeout = .milliseconds(Int64(seconds * 1000)) }
        configuration.maximumFileSize = command.maxSize?.value
        configuration.resumesWithoutValidator = command.resumeUnvalidated
        configuration.maximumRedirects = command.maxRedirects
        if let userAgent = command.userAgent { configuration.userAgent = userAgent }
        // Validated by the command: read again on every run, never stored.
        command.access.apply(to: &configuration)
        if let proxy = command.proxy {
            if proxy.isEmpty {
                configuration.ignoresProxyEnvironment = true  // curl's --proxy "": no proxy at all
            } else {
                configuration.proxy = URL(string: proxy)
            }
        }
        if command.noProxy { configuration.ignoresProxyEnvironment = true }
        configuration.rateLimits = RateLimits(
            perDownload: command.limitRate.flatMap(HaulCommand.parseSize),
            total: command.totalRate.flatMap(HaulCommand.parseSize)
        )
        configuration.connectionsPerFile = command.connections
        configuration.preallocatesFiles = command.fileAllocation == "falloc"
        if let size = command.minSplitSize.flatMap(HaulCommand.parseSize) { configuration.minimumSegmentSize = size }
        configuration.proxyBypass = command.noproxy.map { $0.split(separator: ",").map { String($0).trimmingSpaces } }
        configuration.setsModificationTimeFromServer = command.remoteTime
        configuration.revalidatesCompletedFiles = command.revalidate
        configuration.decodesCompression = command.compressed
        configuration.certificateAuthorityFile = command.caFile.map { URL(fileURLWithPath: $0) }
        configuration.checkpointInterval = command.checkpointInterval.duration
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

        let manager: DownloadManager
        do {
            manager = try DownloadManager(configuration: configuration)
        } catch {
            Reporter.write("haul: \(Self.describe(error))\n", to: STDERR_FILENO)
            return ExitStatus.of(error)
        }
        // Names are chosen once the journal is open: a file Haul placed there from the same URL, as
        // it placed it (same length and modification time), is this download's (complete, or to be
        // revalidated); anything else there (another URL's file, a file edited since, the user's own)
        // is not replaced. One lookup per name that exists, not the whole journal in memory.
        // The input file's out= names a file in the output folder. Each URL is named as the list is
        // read (``DownloadPlan/Namer``), in order.
        var namer = DownloadPlan.Namer(
            output: command.outputPath,
            urlCount: source.count,
            givenNames: source.givenNames,
            isDirectory: isDirectory
        )
        // Read once for every relative destination (`request(for:_:into:workingDirectory:)`); none
        // when it cannot be read (a folder deleted under the shell): each URL then asks as before.
        let currentDirectory = FileManager.default.currentDirectoryPath
        let workingDirectory = currentDirectory.hasPrefix("/") ? currentDirectory : nil
        /// Whether the journal says haul placed the file at `path` for `url` (completed there).
        let placedFor = { (url: String, path: String) -> Bool in
            let absolute = Self.absolute(path, in: workingDirectory)
            let entry = manager.journalEntry(id: DownloadID(destination: URL(fileURLWithPath: absolute)))
            return entry?.state == .completed && entry?.url == Reporter.shown(url)
        }
        // `checked`: the download has a checksum.
        let isOccupied = { (url: String, path: String, checked: Bool) -> Bool in
            var status = stat()
            guard lstat(path, &status) == 0 else { return false }
            let absolute = Self.absolute(path, in: workingDirectory)
            guard let entry = manager.journalEntry(id: DownloadID(destination: URL(fileURLWithPath: absolute))) else {
                // -c: a file someone left at the URL's name is the one to continue, not a name taken.
                return !(command.continuesFile && status.st_mode & S_IFMT == S_IFREG)
            }
            guard entry.url == Reporter.shown(url) else { return true }
            // With a checksum, the file the journal says haul placed for this URL is this
            // download's, changed since or not: its digest decides whether it is kept or fetched
            // again and replaced (before: a good copy at name.1 beside the bad one, exit 0).
            return !(entry.destinationHoldsPlacedFile || (checked && entry.state == .completed))
        }
        // --content-disposition: the server names each file in the folder, unless -o or out= named it.
        let namesFolder = command.contentDisposition && namer.file == nil ? namer.directory : nil
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
        // first row is written, so a download that ends before the list is in is seen too.
        // Entries, names and requests are made as `enqueue` reads them, not kept: a list of 100,000
        // held about 700 bytes per URL as entries, plan items and positions for the whole run. What
        // stays is each download followed (its id's bits and its place in the list) until its outcome.
        var failures = 0
        let following = Following()
        reporter.expect(source.count)
        let outcome = await withTaskGroup(of: Void.self) { group -> Following.Outcome in
            await withCheckedContinuation { (subscribed: CheckedContinuation<Void, Never>) in
                group.addTask {
                    var events = manager.events.makeAsyncIterator()
                    subscribed.resume()
                    let everyEvent = reporter.wantsEveryEvent
                    let showsURLs = reporter.showsURLs
                    while let event = await events.next() {
                        guard everyEvent || event.event.isFinal, let followed = following.followed(event.id) else {
                            continue
                        }
                        let path = event.destinationPath
                        reporter.report(
                            event.event,
                            index: followed.index,
                            name: FilePath.lastComponent(of: followed.destination ?? path),
                            url: showsURLs ? Reporter.shown(source.url(at: followed.index) ?? "") : "",
                            path: path,
                            download: event.download
                        )
                        if following.ended(event) { return }
                    }
                }
            }
            var entries = source.makeIterator()
            var index = -1
            let requests = sequence(state: ()) { _ -> DownloadRequest? in
                while let entry = entries.next() {
                    index += 1
                    if command.discard {
                        do {
                            let request = try Self.discardingRequest(entry, credentials: credentials)
                            // Shown by its URL's name (its destination is /dev/null).
                            let name = FilePath.lastComponent(of: request.url.path)
                            guard following.follow(request.id, index: index, destination: name) else { continue }
                            return request
                        } catch {
                            failures += 1
                            let item = DownloadPlan.Item(url: entry.urls[0], destination: "/dev/null")
                            refuse(item, error: error, reporter: reporter)
                        }
                        continue
                    }
                    let item = namer.item(url: entry.urls[0], given: entry.out) {
                        isOccupied($0, $1, entry.checksum != nil)
                    }
                    let folder = entry.out == nil ? namesFolder : nil
                    do {
                        var request = try Self.request(
                            for: item,
                            entry,
                            into: folder,
                            workingDirectory: workingDirectory,
                            credentials: credentials
                        )
                        // A name haul chose (from the URL, out=) never replaces a file someone
                        // made there during the download; the file -o names is the user's to replace.
                        // A file haul placed for this URL that fails its checksum is replaced too.
                        request.replacesExistingFile =
                            namer.file != nil
                            || (entry.checksum != nil && placedFor(entry.urls[0], item.destination))
                        try Self.confine(
                            &request,
                            out: entry.out,
                            in: namer.directory,
                            workingDirectory: workingDirectory
                        )
                        // -c: a file someone left there is continued (and replaced when whole).
                        request.continuesExistingFile = command.continuesFile
                        // Before its row is written: no event for it can come earlier. Its events
                        // show its destination, but for a name the server gives.
                        let shownDestination = folder == nil ? nil : item.destination
                        guard following.follow(request.id, index: index, destination: shownDestination) else {
                            reporter.joined()  // the same destination again: one download
                            continue
                        }
                        return request
                    } catch {
                        failures += 1
                        refuse(item, error: error, reporter: reporter)
                    }
                }
                return nil
            }
            do {
                let summary = try manager.enqueue(requests)
                for rejection in summary.rejected {
                    // Stopped before it was queued (a FIFO that waited for its reader): not a failure.
                    if interruption.isStopped, rejection.error.code == .shutdown { continue }
                    let request = rejection.request
                    guard let followed = following.followed(request.id) else { continue }
                    let item = DownloadPlan.Item(
                        url: source.url(at: followed.index) ?? request.url.redactedString,
                        destination: followed.destination ?? request.destination.path
                    )
                    refuse(item, error: rejection.error, reporter: reporter)
                    failures += 1
                    following.refused(request.id, index: followed.index)
                }
            } catch {
                // The manager shut down (a signal) or its journal failed: what was queued is kept.
                if !interruption.isStopped {
                    Reporter.write("haul: \(Self.describe(error))\n", to: STDERR_FILENO)
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
        guard failures == 0, outcome.failed == 0, outcome.notCompleted == 0 else {
            // A download left without an outcome (paused) is no failure of a class.
            return outcome.notCompleted > 0 ? ExitStatus.other : reporter.failureStatus
        }
        return ExitStatus.success
    }

    /// Reports a URL of the list that could not be queued.
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
        guard let error = FilePath.makeDirectories(path) else { return }
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
