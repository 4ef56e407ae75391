import ArgumentParser
import FoundationEssentials
import Glibc
import Haul

/// `haul`: download files over HTTP(S), resumably.
@main
struct HaulCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "haul",
        abstract: "Download files over HTTP(S); interrupted downloads resume where they stopped.",
        usage: """
            haul [<options>] <url> ...
            haul [<options>] -i <file>
            haul worker [<options>]
            """,
        discussion: """
            Partial files and state live in <output directory>/.haul/ (see --state). Interrupt with \
            Ctrl-C (the bytes received are kept) and run the same command again to resume.
            """ + "\n\n" + ExitStatus.table,
        version: DownloadManager.version,
        subcommands: [WorkerCommand.self]
    )

    /// `haul worker …` runs ``WorkerCommand``: ArgumentParser would read `worker` as a URL (the
    /// command takes URLs as arguments), so the first word is looked at here.
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        // Read (and copied) above: the secrets in the process's own copy are blanked for `ps`.
        ProcessTitle.blankSecrets()
        if arguments.first == "worker" {
            await WorkerCommand.main(Array(arguments.dropFirst()))
        } else {
            await main(arguments)
        }
    }

    @Argument(help: "The URLs to download (http:// or https://).")
    var urls: [String] = []

    @Option(
        name: [.short, .long],
        help: """
            A file (one URL, not a directory) or a directory for the files (default: .); - for standard \
            output. A device, FIFO or socket is written through, in order (one URL).
            """
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
        help: """
            How many attempts in a row that fail transiently (connection, timeout, 408/429/5xx) without \
            receiving a byte are retried; each retry resumes (default: 5). A server that never answered \
            (connection refused, host unreachable) fails at once unless --retries is given.
            """
    )
    var retries: Int?

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

    @Option(
        name: [.customShort("H"), .long],
        help: ArgumentHelp(
            "A header for every request, as \"Name: value\" (\"Name;\" for an empty value), or @FILE: one per line; repeatable.",
            discussion:
                "Sent to the URL's own origin only, never after a redirect to another host, and never written under .haul/. "
                + "A value given here is blanked in the process's title, but shows in `ps` for a moment and in shell "
                + "history: @FILE (or header= in an input file) keeps a secret off the command line entirely."
        )
    )
    var header: [String] = []

    @Option(
        name: .long,
        help: "A proxy for every request: http://[user:password@]host:port (https://, socks5h:// too); \"\" for none."
    )
    var proxy: String?

    @Option(name: .long, help: "Hosts reached without the proxy, comma-separated (as no_proxy; * for all).")
    var noproxy: String?

    @Flag(name: .long, help: "Ignore http_proxy, https_proxy, all_proxy and no_proxy: connect directly unless --proxy.")
    var noProxy = false

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Name files as the server says (Content-Disposition), else after the URL's last segment after redirects.",
            discussion:
                "Names are made safe and never replace a file haul did not download (name.1 instead); -o FILE wins."
        )
    )
    var contentDisposition = false

    @Option(
        name: .long,
        help: "Each download's bandwidth limit, in bytes per second; K, M and G suffixes count 1024s (as curl's)."
    )
    var limitRate: String?

    @Option(name: .long, help: "The bandwidth limit of all downloads together, as --limit-rate.")
    var totalRate: String?

    @Option(
        name: [.customShort("x"), .long],
        help: ArgumentHelp(
            "Connections per file (1 to 64), as aria2c -x: a large file is split into segments fetched at once.",
            discussion:
                "Only where the server honours ranges and sends a length and a strong validator; else one connection."
        )
    )
    var connections: Int = 1

    @Option(name: .long, help: "The smallest segment a file is split into for -x (default 4M; at least 64K).")
    var minSplitSize: String?

    @Option(
        name: .long,
        help:
            "falloc (default) reserves a file's blocks when its length is known, so a full disk fails at once; none does not."
    )
    var fileAllocation: String = "falloc"

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

    @Flag(
        name: .long,
        help: """
            Hash the file of every completed download in the state directory's journal against the checksum \
            it was asked for (--checksum, checksum=), without fetching; files without one are compared by \
            length and modification time. Exits 1 when a file differs or is missing.
            """
    )
    var verify = false

    @Option(
        name: .long,
        help: """
            Put the URLs into the queue a fleet of workers shares in this PostgreSQL database \
            (postgres://user:password@host:port/db) and return; with --list, show that queue. \
            haul worker downloads them.
            """
    )
    var queue: String?

    @Option(name: .long, help: "With --queue: pause the download with this id (see --list --json), then exit.")
    var pause: String?

    @Option(name: .long, help: "With --queue: queue the paused download with this id again, then exit.")
    var resume: String?

    @Option(name: .long, help: "With --queue: cancel the download with this id, then exit.")
    var cancel: String?

    @Option(name: .long, help: "With --queue: wait until the download with this id ends; exit 0 if it completed.")
    var wait: String?

    @Flag(name: [.short, .long], help: "Print nothing but errors.")
    var quiet = false

    @Flag(name: .long, help: "Print one JSON object per event per line, for scripts.")
    var json = false

    func validate() throws {
        let controls = [pause, resume, cancel, wait].compactMap { $0 }
        if !controls.isEmpty {
            if queue == nil { throw ValidationError("--pause, --resume, --cancel and --wait need --queue.") }
            if controls.count > 1 || list {
                throw ValidationError("Give one of --pause, --resume, --cancel, --wait, --list.")
            }
            return
        }
        if list && verify { throw ValidationError("Give one of --list, --verify.") }
        if list || verify { return }
        if urls.isEmpty && inputFile == nil {
            throw ValidationError("Give at least one URL, or --input-file FILE.")
        }
        if output == "-" || outputIsStream, urls.count + (inputFile == nil ? 0 : 2) != 1 {
            // A stream takes one body (curl and wget write several one after another; haul does not).
            throw ValidationError("-o \(output ?? "-") is a stream: it takes one URL.")
        }
        if let output, Self.specialFileKind(output) == "a block device" {
            throw ValidationError(
                "-o \(output) is a block device: haul never writes to one, nor replaces it with a file."
            )
        }
        if concurrency < 1 { throw ValidationError("--concurrency must be at least 1.") }
        if !(checkpointInterval > 0) { throw ValidationError("--checkpoint-interval must be above 0.") }
        if bufferSize < 4096 { throw ValidationError("--buffer-size must be at least 4096.") }
        if quiet && json { throw ValidationError("--quiet and --json cannot be used together.") }
        if let retries, retries < 0 { throw ValidationError("--retries must be 0 or more.") }
        if maxRedirects < 0 { throw ValidationError("--max-redirects must be 0 or more.") }
        if !(stallTimeout >= 1) { throw ValidationError("--stall-timeout must be at least 1 second.") }
        if let maxSize, maxSize < 0 { throw ValidationError("--max-size must be 0 or more.") }
        let lines: [String]
        do { lines = try headerLines() } catch { throw ValidationError("-H: \(error)") }
        for value in lines {
            switch Self.parseHeader(value) {
            case .failure(let problem): throw ValidationError("-H: \(problem)")
            case .success: break
            }
        }
        if !["falloc", "none"].contains(fileAllocation) {
            throw ValidationError("--file-allocation must be falloc or none.")
        }
        if !(1...64).contains(connections) { throw ValidationError("--connections must be from 1 to 64.") }
        if let minSplitSize {
            guard let bytes = Self.parseSize(minSplitSize), bytes >= 64 * 1024 else {
                throw ValidationError("--min-split-size must be a size of at least 64K, such as 1M or 20M.")
            }
        }
        for (flag, value) in [("--limit-rate", limitRate), ("--total-rate", totalRate)] {
            if let value, Self.parseSize(value) == nil {
                throw ValidationError("\(flag) must be a number of bytes per second, such as 500K or 2M.")
            }
        }
        if let proxy, !proxy.isEmpty {
            guard let url = URL(string: proxy), url.host != nil else {
                throw ValidationError("--proxy must be a URL such as http://proxy.example:3128.")
            }
        }
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
        Reporter.bodyOnStandardOutput = bodyGoesToStandardOutput
        if let queue { throw ExitCode(await runQueue(queue)) }
        if list { throw ExitCode(listJournal()) }
        if verify { throw ExitCode(verifyJournal()) }
        let status = await Runner(command: self).run()
        throw ExitCode(status)
    }

    /// The state directory `--list` and `--verify` read; `nil` (and a message) when it has no journal.
    func journalDirectory() -> String? {
        let directory = state ?? DownloadManager.defaultStateDirectory(besideFolder: output ?? ".")
        guard FileManager.default.fileExists(atPath: "\(directory)/journal.sqlite") else {
            Reporter.write(
                "haul: no journal in '\(directory)': nothing was downloaded with this state directory\n",
                to: STDERR_FILENO
            )
            return nil
        }
        return directory
    }

    /// `--verify`: one line per completed download, its file hashed again.
    func verifyJournal() -> Int32 {
        guard let directory = journalDirectory() else { return 1 }
        let results: [FileVerification]
        do {
            results = try DownloadManager.verify(stateDirectory: URL(fileURLWithPath: directory, isDirectory: true))
        } catch {
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            return 1
        }
        for result in results {
            let entry = result.entry
            var line = JSONEvent.Verified(
                id: entry.id.rawValue,
                url: Reporter.shown(entry.url),
                path: entry.destination,
                result: "matches",
                intact: result.isIntact,
                expected: entry.checksum?.description
            )
            let text: String
            switch result.outcome {
            case .matches:
                text = "ok         \(entry.destination) (\(entry.checksum?.algorithm.rawValue ?? "checksum") matches)"
            case .differs(let actual):
                (line.result, line.actual) = ("differs", actual)
                text =
                    "DIFFERS    \(entry.destination): expected \(entry.checksum?.description ?? "?"), the file has "
                    + "\(actual); run haul again with --checksum to fetch it again"
            case .missing(let detail):
                (line.result, line.detail) = ("missing", detail)
                text = "MISSING    \(entry.destination): \(detail)"
            case .notRecorded(let placed):
                line.result = "notRecorded"
                text =
                    placed
                    ? "unchecked  \(entry.destination) (no checksum was asked for; length and mtime as placed)"
                    : "CHANGED    \(entry.destination) (no checksum was asked for; its length or mtime changed since)"
            }
            Reporter.write(json ? JSONEvent.line(line) : text + "\n", to: STDOUT_FILENO)
        }
        if results.isEmpty, !json { Reporter.write("no completed downloads in \(directory)\n", to: STDOUT_FILENO) }
        return results.allSatisfy(\.isIntact) ? 0 : 1
    }

    /// `--list`: one line per download in the journal.
    func listJournal() -> Int32 {
        guard let directory = journalDirectory() else { return 1 }
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
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            return 1
        }
    }

    /// What is at `path` when it is neither a regular file nor a directory (following links, as
    /// the kernel does: `/dev/stdout` is the pipe or terminal it leads to); `nil` otherwise.
    static func specialFileKind(_ path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0, ![S_IFREG, S_IFDIR].contains(status.st_mode & S_IFMT) else { return nil }
        return FilePath.kind(of: status.st_mode)
    }

    /// A size or rate as curl reads one: a number, optionally with a fraction, then `K`, `M` or `G`
    /// (1024, 1024², 1024³; either case) or nothing. `nil` when it is not one or not above 0.
    static func parseSize(_ text: String) -> Int64? {
        var digits = text.trimmingSpaces
        var unit: Double = 1
        if let last = digits.last, let power = ["k": 1, "m": 2, "g": 3][last.lowercased()] {
            unit = pow(1024, Double(power))
            digits.removeLast()
        }
        guard let value = Double(digits), value.isFinite, value > 0, value * unit < 9e18 else { return nil }
        return max(1, Int64(value * unit))
    }

    /// A `-H` value as a header: `Name: value`, or `Name;` for an empty value (as curl reads them).
    /// The problem, in words that never repeat the value, when it is not one.
    /// The `-H` values, each as given, or for `@FILE` each line of that file that is not blank
    /// (curl's form; a trailing CR is dropped): read on every run, never stored.
    func headerLines() throws(CLIError) -> [String] {
        var lines: [String] = []
        for value in header {
            guard value.hasPrefix("@") else {
                lines.append(value)
                continue
            }
            let path = String(value.dropFirst())
            guard let data = FileManager.default.contents(atPath: path) else {
                let cause = errno == 0 ? "it cannot be read" : String(cString: strerror(errno))
                throw CLIError("cannot read the header file '\(path)': \(cause)")
            }
            for line in String(decoding: data, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
                let text = line.hasSuffix("\r") ? String(line.dropLast()) : String(line)
                if !text.trimmingSpaces.isEmpty { lines.append(text) }
            }
        }
        return lines
    }

    static func parseHeader(_ text: String) -> Result<DownloadHeader, CLIError> {
        let header: DownloadHeader
        if let colon = text.firstIndex(of: ":") {
            let value = String(text[text.index(after: colon)...]).trimmingSpaces
            let name = String(text[..<colon])
            guard !value.isEmpty else {
                return .failure(CLIError("'\(name):' has no value; write '\(name);' to send it empty"))
            }
            header = DownloadHeader(name, value)
        } else if text.hasSuffix(";") {
            header = DownloadHeader(String(text.dropLast()), "")
        } else {
            return .failure(CLIError("a header is \"Name: value\" (or \"Name;\" for an empty value)"))
        }
        if let problem = header.problem() { return .failure(CLIError(problem)) }
        return .success(header)
    }

    var reporterMode: Reporter.Mode {
        if json { return .json }
        if quiet { return .quiet }
        // With the body on standard output, what haul says goes to standard error.
        return isatty(bodyGoesToStandardOutput ? STDERR_FILENO : STDOUT_FILENO) == 1 ? .bars : .lines
    }

    /// `-o`, with `-` as standard output (`/dev/stdout`, as curl and wget read it).
    var outputPath: String? { output == "-" ? "/dev/stdout" : output }

    /// Whether `-o` names a stream: standard output, a character device, a FIFO, a socket. The body
    /// is written through it, in order; nothing is made beside it.
    var outputIsStream: Bool {
        guard let path = outputPath else { return false }
        return FilePath.inheritedDescriptor(of: path) != nil
            || ["a character device", "a FIFO (named pipe)", "a socket"].contains(Self.specialFileKind(path))
    }

    /// Whether the body goes to standard output (`-o -`, `/dev/stdout`, `/dev/fd/1`).
    var bodyGoesToStandardOutput: Bool { outputPath.flatMap(FilePath.inheritedDescriptor(of:)) == 1 }
}
