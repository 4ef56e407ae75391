import ArgumentParser
import FoundationEssentials
import Glibc
import Haul
import HaulPostgres
import Logging

/// `haul --queue URL …`: the list goes into a fleet's queue in PostgreSQL (and `haul` returns), or
/// `--list` shows that queue. Workers (`haul worker`) do the downloading.
extension HaulCommand {
    func runQueue(_ connectionString: String) async -> Int32 {
        // What is to be queued is checked first: a usage error (64) needs no database.
        var requests: [DownloadRequest] = []
        if !list, pause ?? resume ?? cancel ?? wait == nil {
            do {
                requests = try queuedRequests()
                try FleetQueue.check(requests, relativeTo: Self.queueRoot)
            } catch let error as FleetError {
                Reporter.write("haul: cannot queue this: \(error.detail)\n", to: STDERR_FILENO)
                return ExitStatus.usage
            } catch {
                Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
                return ExitStatus.of(error)
            }
        }
        let queue: FleetQueue
        do {
            queue = try await FleetQueue(configuration: .init(connectionString: connectionString))
        } catch {
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            return ExitStatus.of(error)
        }
        if let id = pause ?? resume ?? cancel ?? wait { return await control(queue, DownloadID(rawValue: id)) }
        return list ? await listQueue(queue) : await enqueue(requests, into: queue)
    }

    /// `--pause`, `--resume`, `--cancel`, `--wait ID`.
    private func control(_ queue: FleetQueue, _ id: DownloadID) async -> Int32 {
        do {
            if wait != nil {
                let entry = try await queue.outcome(of: id)
                let detail = entry.lastError.map { ": \($0)" } ?? ""
                if !quiet { Reporter.write("\(entry.state.rawValue)  \(entry.path)\(detail)\n", to: STDOUT_FILENO) }
                // A failure exits by its class, as the download would have in `haul` itself.
                if entry.state == .completed { return 0 }
                return entry.state == .failed ? entry.errorCategory.map(ExitStatus.of) ?? ExitStatus.other : 1
            }
            let done =
                pause != nil
                ? try await queue.pause(id) : resume != nil ? try await queue.resume(id) : try await queue.cancel(id)
            guard done else {
                let what = pause != nil ? "to pause" : resume != nil ? "paused to resume" : "to cancel"
                throw CLIError("no download \(id) \(what) in \(queue.target)", exitStatus: ExitStatus.other)
            }
            return 0
        } catch {
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            return ExitStatus.of(error)
        }
    }

    /// Names under `/` stand for names under each worker's output folder (`-o` is always a folder).
    static let queueRoot = URL(fileURLWithPath: "/", isDirectory: true)

    /// The requests the list makes, each named by its path relative to a worker's output folder:
    /// `-o` (relative, if given) is a folder inside it; out= names a file inside that.
    private func queuedRequests() throws -> [DownloadRequest] {
        if let output, let refusal = ConfinedPath.refusal(output) {
            throw CLIError(
                "with --queue, -o names a folder inside each worker's output folder (haul worker -o); "
                    + "'\(output)' \(refusal)"
            )
        }
        let source = try entrySource()
        var namer = DownloadPlan.Namer(
            output: output,
            urlCount: source.count,
            givenNames: source.givenNames,
            isDirectory: { _ in true }
        )
        var requests: [DownloadRequest] = []
        for entry in source {
            let item = namer.item(url: entry.urls[0], given: entry.out) { _, _ in false }
            let path = URL(fileURLWithPath: item.destination, relativeTo: Self.queueRoot).standardizedFileURL.path
            requests.append(
                try Runner.request(for: DownloadPlan.Item(url: item.url, destination: path), entry, into: nil)
            )
        }
        return requests
    }

    private func enqueue(_ requests: [DownloadRequest], into queue: FleetQueue) async -> Int32 {
        do {
            let added = try await queue.enqueue(requests, relativeTo: Self.queueRoot)
            if !quiet {
                let already = requests.count - added
                let note = already > 0 ? " (\(already) were there already)" : ""
                Reporter.write("haul: queued \(added) downloads\(note) in \(queue.target)\n", to: STDERR_FILENO)
            }
            return 0
        } catch {
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            return ExitStatus.of(error)
        }
    }

    /// `--queue URL --list`: the shared queue, one line (or JSON object) per row.
    private func listQueue(_ queue: FleetQueue) async -> Int32 {
        do {
            var offset = 0
            while true {
                let entries = try await queue.entries(limit: 1000, offset: offset)
                for entry in entries {
                    if json {
                        let line = JSONEvent.ListEntry(
                            id: entry.id.rawValue,
                            url: entry.url.absoluteString,
                            path: entry.path,
                            state: entry.state.rawValue,
                            bytesReceived: entry.bytes ?? 0,
                            totalBytes: entry.bytes,
                            lastError: entry.lastError
                        )
                        Reporter.write(JSONEvent.line(line), to: STDOUT_FILENO)
                        continue
                    }
                    let who = entry.owner.map { " [\($0)]" } ?? entry.finishedBy.map { " [\($0)]" } ?? ""
                    let size = entry.bytes.map { " \(Reporter.size($0))" } ?? ""
                    var line =
                        "\(entry.state.rawValue.padded(to: 10))\(size)  \(entry.url.absoluteString) -> \(entry.path)\(who)"
                    if let error = entry.lastError, entry.state == .failed { line += "\n          \(error)" }
                    Reporter.write(line + "\n", to: STDOUT_FILENO)
                }
                if entries.count < 1000 { break }
                offset += entries.count
            }
            return 0
        } catch {
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            return ExitStatus.of(error)
        }
    }
}

/// `haul worker --queue URL -o DIR -j N`: works through a fleet's queue until stopped.
struct WorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        // "worker", not "haul worker": a name with a space broke the bash completion script (a
        // function named `_haul_haul worker`). Its own usage line names it whole.
        commandName: "worker",
        abstract: "Download the files of a queue shared in PostgreSQL, with other workers, until stopped.",
        usage: "haul worker --queue <queue> [<options>]",
        discussion: """
            Claims downloads from the queue (haul --queue URL -i LIST fills it) under leases, downloads \
            them into DIR, and records each outcome. SIGTERM or SIGINT: the transfers pause (their \
            bytes stay in the state directory), their downloads go back to the queue for any worker, \
            and haul exits with 143 or 130. A worker that is killed loses its downloads to the others \
            when its leases expire (--lease). Each worker keeps its state in a folder of its own, \
            <output directory>/.haul/workers/<name> by default, so that any number of workers share \
            one output folder; a download taken over from a worker that is gone continues from the \
            bytes it left there (or in --shared-state, on storage every worker mounts), and one \
            whose lease ran out while its worker still ran (hung, or cut off from the database) \
            continues from the bytes that worker hands over once it learns. With --state (one \
            folder for this worker alone), it starts over.
            """
    )

    @Option(name: .long, help: "The queue's PostgreSQL database (postgres://user:password@host:port/db).")
    var queue: String

    @Option(name: [.short, .long], help: "The folder the queue's files go into.")
    var output: String = "."

    @Option(name: [.customShort("j"), .long], help: "How many downloads transfer at once.")
    var concurrency: Int = 4

    @Option(
        name: .long,
        help:
            "A folder for this worker's partial files and state alone (default: <output directory>/.haul/workers/<name>)."
    )
    var state: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A folder on storage every worker shares, holding each worker's state in a folder named after it.",
            discussion:
                "A download taken over from a worker that is gone, or handed over by one that lost its lease, continues from its bytes."
        )
    )
    var sharedState: String?

    @Option(name: .long, help: "Seconds a claimed download stays this worker's without a renewal.")
    var lease = Seconds(30)

    @Option(name: .long, help: "At most this many downloads from one host at once across every worker.")
    var perHost: Int?

    @Option(name: .long, help: "This worker's name in the queue (default: host name, process id, a random suffix).")
    var name: String?

    @Flag(name: .long, help: "Exit (0) once the queue has nothing left for this worker, instead of waiting for more.")
    var untilEmpty = false

    @Flag(name: [.short, .long], help: "Print nothing but errors.")
    var quiet = false

    /// Headers, cookies, users and passwords for the queue's URLs: the queue holds none of them.
    @OptionGroup(title: "Credentials and headers (each worker's own; sent to each URL's origin only)")
    var access: AccessOptions
    /// curl's `-n` (``NetrcFlag``).
    @OptionGroup(title: "Credentials and headers (each worker's own; sent to each URL's origin only)")
    var netrcFlag: NetrcFlag

    /// Timeouts, redirects, the proxy, TLS, bandwidth, connections per file: as haul's.
    @OptionGroup(title: "Network")
    var network: NetworkOptions

    /// The buffer, syncs, reservation, size limit, times: as haul's.
    @OptionGroup(title: "Files on disk")
    var files: FileOptions

    func validate() throws {
        try netrcFlag.validate(with: access)
        if concurrency < 1 { throw ValidationError("--concurrency must be at least 1.") }
        if !(lease.value >= 1) { throw ValidationError("--lease must be at least 1 second.") }
        if let perHost, perHost < 1 { throw ValidationError("--per-host must be at least 1.") }
        if state != nil, sharedState != nil { throw ValidationError("--state and --shared-state: give one.") }
        // Without --state, the worker's state is a folder named after it.
        if state == nil, let name, FleetWorker.stateDirectory(in: URL(fileURLWithPath: "/"), worker: name) == nil {
            throw ValidationError("--name is a folder's name (its state folder): not empty, '.', '..', nor with '/'.")
        }
    }

    func run() async throws {
        throw ExitCode(await work())
    }

    /// Where the workers on `folder` keep their state by default: `<folder>/.haul/workers`, each in a
    /// folder named after it.
    static func workersFolder(besideFolder folder: String) -> String {
        DownloadManager.defaultStateDirectory(besideFolder: folder) + "/workers"
    }

    private func work() async -> Int32 {
        let folder = URL(fileURLWithPath: output, isDirectory: true).standardizedFileURL
        var queueConfiguration = FleetQueue.Configuration(connectionString: queue, worker: name)
        queueConfiguration.outputFolder = folder
        queueConfiguration.leaseDuration = lease.duration
        queueConfiguration.maxConcurrentDownloadsPerHost = perHost
        var configuration = DownloadManager.Configuration()
        configuration.maxConcurrentDownloads = concurrency
        access.apply(to: &configuration)
        network.apply(to: &configuration)
        files.apply(to: &configuration)
        let credentials: Credentials
        do {
            credentials = try access.credentials()
        } catch {
            Reporter.write("haul: \(error)\n", to: STDERR_FILENO)
            return error.exitStatus
        }
        // The workers on one output folder share <output>/.haul/workers, each in a folder named after
        // it: several run side by side, and one takes over the bytes of another that is gone.
        var shared = sharedState.map { URL(fileURLWithPath: $0, isDirectory: true).standardizedFileURL }
        if state == nil, shared == nil {
            shared = URL(fileURLWithPath: Self.workersFolder(besideFolder: folder.path), isDirectory: true)
        }
        if let state {
            configuration.stateDirectory = URL(fileURLWithPath: state, isDirectory: true)
        } else if let shared, let own = FleetWorker.stateDirectory(in: shared, worker: queueConfiguration.worker) {
            configuration.stateDirectory = own
        } else {
            Reporter.write(
                "haul: the worker name '\(queueConfiguration.worker)' cannot name its state folder; give --name or --state\n",
                to: STDERR_FILENO
            )
            return 64
        }
        // Only what this worker claims runs: a download left in its journal by an earlier run is
        // the queue's again (released, or taken over), not this journal's to resume.
        configuration.resumesUnfinishedDownloads = false
        let fleet: FleetQueue
        let manager: DownloadManager
        do {
            try Runner.makeDirectory(folder.path)
            fleet = try await FleetQueue(configuration: queueConfiguration)
            manager = try DownloadManager(configuration: configuration)
        } catch {
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            return ExitStatus.of(error)
        }
        if !quiet {
            Reporter.write(
                "haul worker \(fleet.configuration.worker): \(fleet.target) into \(folder.path), \(concurrency) at once\n",
                to: STDERR_FILENO
            )
        }
        // --quiet prints nothing but errors: a takeover's note and the queue's warnings too.
        var logger = Logger(label: "haul.fleet")
        logger.logLevel = quiet ? .error : .info
        let worker = FleetWorker(
            queue: fleet,
            manager: manager,
            concurrency: concurrency,
            sharedStateDirectory: shared,
            logger: logger,
            prepare: { request in
                var request = request
                request.url = credentials.apply(to: request.url)
                return request
            }
        )
        let task = Task { [untilEmpty] in try await worker.run(untilEmpty: untilEmpty) }
        let stop = Interruption { task.cancel() }  // the worker pauses its transfers and gives their rows back
        stop.install()
        var status: Int32 = 0
        do {
            try await task.value
        } catch {
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            status = ExitStatus.of(error)
        }
        await manager.shutdown()
        if let signal = stop.received {
            if !quiet {
                Reporter.write("haul worker: stopped; its downloads are back in the queue\n", to: STDERR_FILENO)
            }
            return 128 + signal
        }
        return status
    }
}
