import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Haul
import Synchronization

/// `haul`: download files over HTTP(S), resumably.
@main
struct HaulCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "haul",
        abstract: "Download files over HTTP(S); interrupted downloads resume where they stopped.",
        discussion: """
            Partial files and state live in <output directory>/.haul/ (see --state). Interrupt with \
            Ctrl-C (the bytes received are kept) and run the same command again to resume. \
            The exit status is 0 only when every download completed.
            """,
        version: DownloadManager.version
    )

    @Argument(help: "The URLs to download (http:// or https://).")
    var urls: [String] = []

    @Option(
        name: [.short, .long],
        help: "A file (one URL, not a directory) or a directory for the files (default: .)."
    )
    var output: String?

    @Option(
        name: [.customShort("i"), .long],
        help: "Read URLs from FILE, one per line (# comments and blank lines ignored)."
    )
    var inputFile: String?

    @Option(name: [.customShort("j"), .long], help: "How many downloads transfer at once.")
    var concurrency: Int = 4

    @Option(name: .long, help: "The folder for partial files and state (default: <output directory>/.haul).")
    var state: String?

    @Option(name: .long, help: "Bytes collected before each write to disk.")
    var bufferSize: Int = 128 * 1024

    @Option(
        name: .long,
        help: "Seconds between syncs of partial files to disk (after a reboot a partial is cut back to its last sync)."
    )
    var checkpointInterval: Double = 5

    @Option(
        name: .long,
        help:
            "How many attempts in a row that fail transiently (connection, timeout, 408/429/5xx) without receiving a byte are retried; each retry resumes."
    )
    var retries: Int = 5

    @Option(name: .long, help: "Seconds without receiving anything before a transfer is aborted and retried.")
    var stallTimeout: Double = 30

    @Option(name: .long, help: "The expected digest of the file, as ALGO:HEX (sha256, sha1 or md5); one URL only.")
    var checksum: String?

    @Option(name: .long, help: "The largest file accepted, in bytes; a larger one fails.")
    var maxSize: Int64?

    @Option(name: .long, help: "A PEM file of certificate authorities for HTTPS (instead of the system's).")
    var caFile: String?

    @Option(name: [.customShort("A"), .long], help: "The User-Agent header of every request (default: Haul/VERSION).")
    var userAgent: String?

    @Option(name: .long, help: "How many redirects a download follows.")
    var maxRedirects: Int = 10

    @Flag(
        name: .long,
        help: "Ask for a compressed body and decode it (as curl --compressed); such a download cannot resume mid-body."
    )
    var compressed = false

    @Flag(name: .long, help: "Give each file the server's Last-Modified time (as curl -R and wget do).")
    var remoteTime = false

    @Flag(
        name: .long,
        help: "Ask the server whether a file downloaded before changed (If-None-Match), and fetch it again if it did."
    )
    var revalidate = false

    @Flag(
        name: .long,
        help: """
            Continue a partial file even when the server gives no strong validator (ETag or Last-Modified) \
            to prove it is the same version, after checking that the 64 KiB before its end are unchanged. \
            Without this, such a partial starts over.
            """
    )
    var resumeUnvalidated = false

    @Flag(name: .long, help: "List the downloads recorded in the state directory's journal, then exit.")
    var list = false

    @Flag(name: [.short, .long], help: "Print nothing but errors.")
    var quiet = false

    @Flag(name: .long, help: "Print one JSON object per event per line, for scripts.")
    var json = false

    func validate() throws {
        if list { return }
        if urls.isEmpty && inputFile == nil {
            throw ValidationError("Give at least one URL, or --input-file FILE.")
        }
        if output == "-" {
            // curl and wget read "-" as standard output; a stream cannot be resumed or renamed into place.
            throw ValidationError(
                "-o - (standard output) is not supported: haul writes files it can resume. Give a file or directory name."
            )
        }
        if concurrency < 1 { throw ValidationError("--concurrency must be at least 1.") }
        if !(checkpointInterval > 0) { throw ValidationError("--checkpoint-interval must be above 0.") }
        if bufferSize < 4096 { throw ValidationError("--buffer-size must be at least 4096.") }
        if quiet && json { throw ValidationError("--quiet and --json cannot be used together.") }
        if retries < 0 { throw ValidationError("--retries must be 0 or more.") }
        if maxRedirects < 0 { throw ValidationError("--max-redirects must be 0 or more.") }
        if !(stallTimeout >= 1) { throw ValidationError("--stall-timeout must be at least 1 second.") }
        if let maxSize, maxSize < 0 { throw ValidationError("--max-size must be 0 or more.") }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw ValidationError("--ca-file '\(caFile)' cannot be read.")
        }
        if let checksum {
            guard Checksum(checksum) != nil else {
                throw ValidationError(
                    "--checksum must be ALGO:HEX with ALGO sha256, sha1 or md5 and HEX of 64, 40 or 32 hexadecimal digits."
                )
            }
            if urls.count + (inputFile == nil ? 0 : 2) != 1 {
                throw ValidationError("--checksum applies to exactly one URL.")
            }
        }
    }

    func run() async throws {
        if list { throw ExitCode(listJournal()) }
        let status = await Runner(command: self).run()
        throw ExitCode(status)
    }

    /// `--list`: one line per download in the journal.
    func listJournal() -> Int32 {
        let directory = state ?? DownloadManager.defaultStateDirectory(besideFolder: output ?? ".")
        guard FileManager.default.fileExists(atPath: "\(directory)/journal.sqlite") else {
            Reporter.write(
                "haul: no journal in '\(directory)': nothing was downloaded with this state directory\n",
                to: STDERR_FILENO
            )
            return 1
        }
        do {
            let entries = try DownloadManager.journalEntries(
                stateDirectory: URL(fileURLWithPath: directory, isDirectory: true)
            )
            if json {
                for entry in entries {
                    let line = JSONEvent.ListEntry(
                        id: entry.id.rawValue,
                        url: entry.url,
                        path: entry.destination,
                        state: entry.state.description,
                        bytes: entry.bytesReceived,
                        total: entry.totalBytes,
                        error: entry.lastError
                    )
                    Reporter.write(JSONEvent.line(line), to: STDOUT_FILENO)
                }
                return 0
            }
            for entry in entries {
                let total = entry.totalBytes.map { Reporter.size($0) } ?? "?"
                let percent = entry.totalBytes.flatMap { $0 > 0 ? " \(entry.bytesReceived * 100 / $0)%" : nil } ?? ""
                var line = "\(entry.state.description.padded(to: 11)) "
                line += "\(Reporter.size(entry.bytesReceived))/\(total)\(percent)  \(entry.url) -> \(entry.destination)"
                if let error = entry.lastError, entry.state == .failed { line += "\n          \(error)" }
                Reporter.write(line + "\n", to: STDOUT_FILENO)
            }
            if entries.isEmpty { Reporter.write("no downloads in \(directory)\n", to: STDOUT_FILENO) }
            return 0
        } catch {
            Reporter.write("haul: \(error)\n", to: STDERR_FILENO)
            return 1
        }
    }

    /// All URLs: the arguments, then the input file's.
    func allURLs() throws -> [String] {
        var all = urls
        if let inputFile {
            guard let data = FileManager.default.contents(atPath: inputFile) else {
                throw CLIError("cannot read the input file '\(inputFile)': \(String(cString: strerror(errno)))")
            }
            all += DownloadPlan.urls(inInputFile: String(decoding: data, as: UTF8.self))
        }
        return all
    }

    var reporterMode: Reporter.Mode {
        if json { return .json }
        if quiet { return .quiet }
        return isatty(STDOUT_FILENO) == 1 ? .bars : .lines
    }
}

/// A failure of the command itself (not of one download), printed as one line.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs one `haul` invocation and returns its exit status.
struct Runner {
    let command: HaulCommand

    func run() async -> Int32 {
        let urls: [String]
        let directory: String
        let isDirectory = { (path: String) -> Bool in
            var status = stat()
            return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
        }
        do {
            urls = try command.allURLs()
            guard !urls.isEmpty else { throw CLIError("the input file has no URLs") }
            directory =
                DownloadPlan.resolve(output: command.output, urlCount: urls.count, isDirectory: isDirectory).directory
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
        let plan = DownloadPlan.make(urls: urls, output: command.output, isDirectory: isDirectory) { url, path in
            var status = stat()
            guard lstat(path, &status) == 0 else { return false }
            guard let entry = manager.journalEntry(id: DownloadID(destination: URL(fileURLWithPath: path))) else {
                return true
            }
            return !(entry.destinationHoldsPlacedFile && entry.url == Reporter.shown(url))
        }
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
                guard let download = start(item, index: index, manager: manager, reporter: reporter) else {
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

    /// Creates the download of `item`, or reports why it cannot be (`nil`).
    func start(_ item: DownloadPlan.Item, index: Int, manager: DownloadManager, reporter: Reporter) -> Download? {
        do {
            let download: Download
            if let checksum = command.checksum.flatMap(Checksum.init) {
                guard let url = URL(string: item.url.trimmingSpaces) else {
                    throw DownloadError(
                        code: .invalidURL,
                        url: Reporter.shown(item.url),
                        detail: "it could not be parsed"
                    )
                }
                download = try manager.download(
                    DownloadRequest(
                        url: url,
                        destination: URL(fileURLWithPath: item.destination, isDirectory: false),
                        checksum: checksum
                    )
                )
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
        let path = download.destination.path  // absolute
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

/// SIGINT, SIGTERM and SIGHUP (a closed terminal): pause everything (buffered bytes are written),
/// then let the run end with 130, 143 or 129. A second signal exits at once. A signal ignored when
/// `haul` started stays ignored: a shell starts background jobs with SIGINT ignored, so that Ctrl-C
/// at the prompt does not reach them (`nohup` does the same for SIGHUP), as curl and wget respect.
final class Interruption: @unchecked Sendable {
    // @unchecked Sendable: `sources` is written once in `install()` before any signal can arrive;
    // `signal` is guarded by `lock`.
    private let manager: DownloadManager
    private let reporter: Reporter
    private var sources: [DispatchSourceSignal] = []
    private let signal = Mutex<Int32?>(nil)

    init(manager: DownloadManager, reporter: Reporter) {
        self.manager = manager
        self.reporter = reporter
    }

    var received: Int32? { signal.withLock { $0 } }

    /// Whether `number` is ignored (as the parent left it, before ``install()``).
    static func isIgnored(_ number: Int32) -> Bool {
        var action = sigaction()
        guard sigaction(number, nil, &action) == 0 else { return false }
        return unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self)
            == unsafeBitCast(SIG_IGN, to: Int.self)
    }

    func install() {
        for number in [SIGINT, SIGTERM, SIGHUP] where !Self.isIgnored(number) {
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in
                let first = signal.withLock { signal -> Bool in
                    defer { if signal == nil { signal = number } }
                    return signal == nil
                }
                guard first else { exit(128 + number) }
                Task { await self.manager.shutdown() }
            }
            source.resume()
            sources.append(source)
        }
    }
}
