import Dispatch
import FoundationEssentials
import Glibc
import Haul

/// Runs one `haul` invocation and returns its exit status.
struct Runner {
    let command: HaulCommand

    func run() async -> Int32 {
        let entries: [InputFile.Entry]
        let directory: String
        let isDirectory = { (path: String) -> Bool in
            var status = stat()
            return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
        }
        do {
            let all = try command.allEntries()
            entries = all.entries
            guard !entries.isEmpty else { throw CLIError("the input file has no URLs") }
            for (option, line) in all.ignored {
                Reporter.write(
                    "haul: the input file's option '\(option)' (line \(line)) is not supported and is ignored\n",
                    to: STDERR_FILENO
                )
            }
            directory =
                DownloadPlan.resolve(output: command.output, urlCount: entries.count, isDirectory: isDirectory)
                .directory
            try Self.makeDirectory(directory)
        } catch {
            Reporter.write("haul: \(Self.describe(error))\n", to: STDERR_FILENO)
            return 1
        }

        var configuration = DownloadManager.Configuration()
        configuration.maxConcurrentDownloads = command.concurrency
        configuration.bufferSize = command.bufferSize
        configuration.retryLimit = command.retries
        configuration.stallTimeout = .milliseconds(Int64(command.stallTimeout * 1000))
        configuration.maximumFileSize = command.maxSize
        configuration.resumesWithoutValidator = command.resumeUnvalidated
        configuration.maximumRedirects = command.maxRedirects
        if let userAgent = command.userAgent { configuration.userAgent = userAgent }
        // Validated by the command: read again on every run, never stored.
        configuration.headers = command.header.compactMap { try? HaulCommand.parseHeader($0).get() }
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
        configuration.checkpointInterval = .milliseconds(Int64(command.checkpointInterval * 1000))
        configuration.stateDirectory = URL(
            fileURLWithPath: command.state ?? DownloadManager.defaultStateDirectory(besideFolder: directory),
            isDirectory: true
        )
        configuration.progressInterval = .milliseconds(command.json ? 200 : 100)
        // Only this command's URLs run; others in the journal stay as they are.
        configuration.resumesUnfinishedDownloads = false

        let manager: DownloadManager
        do {
            manager = try DownloadManager(configuration: configuration)
        } catch {
            Reporter.write("haul: \(error)\n", to: STDERR_FILENO)
            return 1
        }
        // Names are chosen once the journal is open: a file Haul placed there from the same URL, as
        // it placed it (same length and modification time), is this download's (complete, or to be
        // revalidated); anything else there (another URL's file, a file edited since, the user's own)
        // is not replaced. One lookup per name that exists, not the whole journal in memory.
        let urls = entries.map { $0.urls[0] }
        var plan = DownloadPlan.make(urls: urls, output: command.output, isDirectory: isDirectory) { url, path in
            var status = stat()
            guard lstat(path, &status) == 0 else { return false }
            guard let entry = manager.journalEntry(id: DownloadID(destination: URL(fileURLWithPath: path))) else {
                return true
            }
            return !(entry.destinationHoldsPlacedFile && entry.url == Reporter.shown(url))
        }
        let intoFolder =
            DownloadPlan.resolve(output: command.output, urlCount: urls.count, isDirectory: isDirectory).file == nil
        // The input file's out= names a file in the output folder.
        for (index, entry) in entries.enumerated() where intoFolder {
            if let out = entry.out { plan.items[index].destination = "\(plan.outputDirectory)/\(out)" }
        }
        // --content-disposition: the server names each file in the folder, unless -o or out= named it.
        let namesFolder = command.contentDisposition && intoFolder ? plan.outputDirectory : nil
        let reporter = Reporter(mode: command.reporterMode)
        let interruption = Interruption(manager: manager, reporter: reporter)
        interruption.install()

        // A window of downloads at a time, the next one started as one ends: a list of a million
        // URLs holds a window's objects and tasks, not a million (about 7 KB each).
        let window = max(64, command.concurrency * 4)
        reporter.expect(plan.items.count)
        var failures = 0
        var pending = plan.items.enumerated().makeIterator()
        /// Starts downloads until `window` run or the list ends; a URL refused at once is a failure.
        func fill(_ group: inout TaskGroup<Bool>, running: inout Int) {
            while running < window, interruption.received == nil, let (index, item) = pending.next() {
                let entry = entries[index]
                let folder = entry.out == nil ? namesFolder : nil
                guard
                    let download = start(item, entry, index: index, into: folder, manager: manager, reporter: reporter)
                else {
                    failures += 1
                    continue
                }
                running += 1
                group.addTask { await Self.follow(download, index: index, item: item, reporter: reporter) }
            }
        }
        let completed = await withTaskGroup(of: Bool.self) { group in
            var running = 0
            var completed = 0
            fill(&group, running: &running)
            while let ok = await group.next() {
                running -= 1
                if ok { completed += 1 }
                fill(&group, running: &running)
            }
            return completed
        }
        await manager.shutdown()
        if let signal = interruption.received {
            reporter.finish(interrupted: true)
            return 128 + signal
        }
        reporter.finish(interrupted: false)
        return failures == 0 && completed == plan.items.count ? 0 : 1
    }

    /// Creates the download of `item` (into `folder` under the server's name, when given), or
    /// reports why it cannot be (`nil`).
    func start(
        _ item: DownloadPlan.Item,
        _ entry: InputFile.Entry,
        index: Int,
        into folder: String?,
        manager: DownloadManager,
        reporter: Reporter
    ) -> Download? {
        do {
            let download: Download
            if entry.checksum != nil || folder != nil || entry.urls.count > 1 || !entry.headers.isEmpty {
                func parsed(_ text: String) throws(DownloadError) -> URL {
                    guard let url = URL(string: text.trimmingSpaces) else {
                        throw DownloadError(
                            code: .invalidURL,
                            url: Reporter.shown(text),
                            detail: "it could not be parsed"
                        )
                    }
                    return url
                }
                var request = DownloadRequest(
                    url: try parsed(item.url),
                    destination: URL(fileURLWithPath: folder ?? item.destination, isDirectory: folder != nil),
                    checksum: entry.checksum,
                    headers: entry.headers
                )
                request.takesFileNameFromServer = folder != nil
                for mirror in entry.urls.dropFirst() { request.mirrors.append(try parsed(mirror)) }
                download = try manager.download(request)
            } else {
                download = try manager.download(
                    from: item.url,
                    to: URL(fileURLWithPath: item.destination, isDirectory: false)
                )
            }
            reporter.add(
                index: index,
                name: String(item.destination.split(separator: "/").last ?? ""),
                alreadyComplete: download.wasAlreadyComplete
            )
            return download
        } catch {
            reporter.refused()
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
            return nil
        }
    }

    /// Reports `download` until it ends: whether it completed.
    static func follow(_ download: Download, index: Int, item: DownloadPlan.Item, reporter: Reporter) async -> Bool {
        defer { reporter.ended(download) }
        // Absolute; a download into a folder names its file once the server answered.
        var path: String { download.destination.path }
        let url = Reporter.shown(item.url)
        guard reporter.wantsEveryEvent else {
            // Only the outcome is shown: wait for it without following every event.
            do {
                let file = try await download.finished()
                reporter.report(.completed(file), index: index, url: url, path: path, download: download)
                return true
            } catch let error as DownloadError where error.code != .shutdown {
                reporter.report(.failed(error), index: index, url: url, path: path, download: download)
                return false
            } catch {
                return false
            }
        }
        var last: DownloadEvent?
        for await event in download.events {
            reporter.report(event, index: index, url: url, path: path, download: download)
            last = event
        }
        if case .completed = last { return true }
        return false
    }

    /// `mkdir -p`, with the failing folder and the system's reason in the error.
    static func makeDirectory(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/\(component)"
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw CLIError("cannot create the output folder '\(prefix)': \(String(cString: strerror(errno)))")
            }
        }
        var status = stat()
        guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR else {
            throw CLIError("cannot use '\(path)' as the output folder: \(String(cString: strerror(ENOTDIR)))")
        }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? DownloadError { return error.description }
        if let error = error as? CLIError { return error.description }
        if let error = error as? CocoaError {
            let cause =
                (error.underlying as? POSIXError).map { String(cString: strerror($0.code.rawValue)) } ?? "\(error.code)"
            return error.filePath.map { "'\($0)': \(cause)" } ?? cause
        }
        return String(describing: error)
    }
}
