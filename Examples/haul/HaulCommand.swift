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
            haul load [<options>] <url> ...
            """,
        discussion: """
            Partial files and state live in <output directory>/.haul/ (see --state). Interrupt with \
            Ctrl-C (the bytes received are kept) and run the same command again to resume.
            """ + "\n\n" + ExitStatus.table,
        version: DownloadManager.version,
        subcommands: [WorkerCommand.self, LoadCommand.self]
    )

    /// Whether haul started with its standard output closed (`>&-`): `-o -` has nowhere to write.
    /// Set once, first thing in ``main()``.
    nonisolated(unsafe) static var standardOutputWasClosed = false

    /// `haul worker …` runs ``WorkerCommand``: ArgumentParser would read `worker` as a URL (the
    /// command takes URLs as arguments), so the first word is looked at here.
    static func main() async {
        // Before any file is opened: one must not take a closed standard descriptor's number.
        standardOutputWasClosed = DownloadManager.openClosedStandardDescriptors().contains(STDOUT_FILENO)
        let arguments = Array(CommandLine.arguments.dropFirst())
        // Read (and copied) above: the secrets in the process's own copy are blanked for `ps`.
        ProcessTitle.blankSecrets()
        if arguments.first == "worker" {
            await WorkerCommand.main(Array(arguments.dropFirst()))
        } else if arguments.first == "load" {
            await LoadCommand.main(Array(arguments.dropFirst()))
        } else if arguments.first == "help", arguments.dropFirst().first == "worker" {
            // `haul help worker`, as ArgumentParser's own `help` would say it (haul reads words as URLs).
            await WorkerCommand.main(["--help"])
        } else if arguments.first == "help", arguments.dropFirst().first == "load" {
            await LoadCommand.main(["--help"])
        } else if let unknown = unknownOptionError(in: arguments) {
            exit(withError: unknown)
        } else {
            await main(arguments)
        }
    }

    /// ArgumentParser validates the command before it reports an option it does not know, so that
    /// `haul --bogus` would hear "Give at least one URL": parsed again with a URL after the
    /// arguments, an unknown option is what fails, and that is what haul says.
    static func unknownOptionError(in arguments: [String]) -> (any Error)? {
        guard arguments.contains(where: { $0.hasPrefix("-") && $0 != "-" }) else { return nil }
        do {
            _ = try parseAsRoot(arguments + ["--", "http://unknown-option.invalid/"])
            return nil
        } catch {
            return message(for: error).hasPrefix("Unknown option") ? error : nil
        }
    }

    @Argument(help: "The URLs to download (http:// or https://).")
    var urls: [String] = []

    @Option(
        name: [.customShort("o", allowingJoined: true), .long],
        help: """
            A file (one URL, not a directory) or a directory for the files (default: .); - for standard \
            output. A device, FIFO or socket is written through, in order (one URL). Missing folders \
            are created.
            """
    )
    var output: String?

    @Option(
        name: [.customShort("i", allowingJoined: true), .long],
        help: "Read URLs from FILE (- for standard input), one per line (# comments and blank lines ignored)."
    )
    var inputFile: String?

    @Option(name: [.customShort("j", allowingJoined: true), .long], help: "How many downloads transfer at once.")
    var concurrency: Int = 4

    @Option(name: .long, help: "The folder for partial files and state (default: <output directory>/.haul).")
    var state: String?

    @Option(
        name: .long,
        help: """
            How many attempts in a row that fail transiently (connection, timeout, 408/429/5xx) without \
            receiving a byte are retried; each retry resumes (default: 5). A server that never answered \
            (connection refused, host unreachable) fails at once unless --retries is given.
            """
    )
    var retries: Int?

    @Option(
        name: .long,
        help: "The expected digest of the file, as ALGO:HEX or ALGO=HEX (sha256, sha1 or md5; sha-256…); one URL only."
    )
    var checksum: String?

    /// Who the requests say they are: `-H`, `-u`, `-b`, `--netrc-file`, `--no-netrc` (shared with `haul worker`).
    @OptionGroup(title: "Credentials and headers")
    var access: AccessOptions
    /// curl's `-n` (``NetrcFlag``).
    @OptionGroup(title: "Credentials and headers")
    var netrcFlag: NetrcFlag

    /// Timeouts, redirects, the proxy, TLS, bandwidth, connections per file (shared with `haul worker`).
    @OptionGroup(title: "Network")
    var network: NetworkOptions

    /// The buffer, syncs, reservation, size limit, times (shared with `haul worker`).
    @OptionGroup(title: "Files on disk")
    var files: FileOptions

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Name files as the server says (Content-Disposition), else after the URL's last segment after redirects.",
            discussion:
                "Names are made safe and never replace a file haul did not download (name.1 instead); -o FILE wins."
        )
    )
    var contentDisposition = false

    @Flag(
        name: .long,
        help: "Ask the server whether a file downloaded before changed (If-None-Match), and fetch it again if it did."
    )
    var revalidate = false

    @Flag(
        name: [.customShort("c"), .customLong("continue")],
        help: """
            Continue a file already at the destination that haul did not download (as wget -c, \
            aria2c -c and curl -C - do), when the server honours ranges and the 64 KiB before its end \
            are unchanged; else fetch it whole. The file stays as it is until the download replaces it.
            """
    )
    var continues = false

    @Option(
        name: [.customShort("C"), .customLong("continue-at")],
        help: "- continues as -c does (curl -C -); haul takes no offset: it continues from the file's own length."
    )
    var continueAt: String?

    @Flag(
        name: .long,
        help: """
            Replace a file at a name haul takes from the URL that haul did not download (or whose \
            version the server no longer has), instead of saving the download as name.1.
            """
    )
    var force = false

    /// `-c`, or curl's spelling of it, `-C -`.
    var continuesFile: Bool { continues || continueAt == "-" }

    @Option(
        name: [.customShort("m", allowingJoined: true), .long],
        help: """
            Stop the run after this many seconds (as curl -m): downloads not finished are paused, their \
            bytes kept for the next run; exit status 28.
            """
    )
    var maxTime: Double?

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

    @Flag(
        name: [.short, .long],
        help: "Show each request's and response's headers on standard error (secrets redacted), as curl -v."
    )
    var verbose = false

    @Flag(name: [.customShort("L"), .long], help: "Follow redirects: what haul always does (accepted, as curl -L).")
    var location = false

    @Flag(
        name: [.customShort("O"), .customLong("remote-name")],
        help: "Name each file from its URL: what haul does without -o (accepted, as curl -O)."
    )
    var remoteName = false

    @Flag(
        name: .long,
        help: """
            Read each body and throw it away, writing nothing (a load test); with --json, each \
            download's timings (time to first byte, total, attempts, connections).
            """
    )
    var discard = false

    func run() async throws {
        Reporter.bodyOnStandardOutput = bodyGoesToStandardOutput
        if let queue { throw ExitCode(await runQueue(queue)) }
        if list { throw ExitCode(listJournal()) }
        if verify { throw ExitCode(verifyJournal()) }
        let status = await Runner(command: self).run()
        throw ExitCode(status)
    }
}
