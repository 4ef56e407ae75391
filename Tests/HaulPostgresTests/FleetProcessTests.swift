import Foundation
import Glibc
import Haul
import Testing

@testable import HaulPostgres
@testable import HaulTestSupport

/// `haul --queue` and `haul worker`: several worker processes sharing one PostgreSQL queue.
///
/// Heavy (worker processes, PostgreSQL, nginx, thousands of files on two cores): `scripts/test.sh`
/// runs this suite alone after the others, whose timing bounds it would otherwise starve.
@Suite("haul worker processes (PostgreSQL, nginx)", .timeLimit(.minutes(3)))
struct FleetProcessTests {
    static var haulPath: String { HaulBinary.path }

    func haul(_ arguments: [String], in directory: URL, environment: [String: String]? = nil) async throws
        -> HaulBinary.Run
    {
        try await HaulBinary.run(arguments, in: directory, environment: environment)
    }

    /// Waits until `done` says so about the queue's counts, looking again at each outcome announced
    /// on `haul_downloads` (and at least once a second).
    func waitForQueue(_ database: String, until done: ([FleetState: Int]) -> Bool) async throws -> [FleetState: Int] {
        let listener = try PostgresConnection(database)
        try listener.query("LISTEN haul_downloads")
        let queue = try await FleetQueue(configuration: .init(connectionString: database, worker: "observer"))
        while true {
            let counts = try await queue.counts()
            if done(counts) { return counts }
            try await TestPostgres.waitForNotification(on: listener, upTo: 1000)
        }
    }

    @Test(
        "three workers on one -o without --state (their default, <out>/.haul/workers) over 5,000 URLs, one SIGKILLed mid-way: every file whole, every URL completed once, fetched again only if the killed one held it"
    )
    func fleetOfWorkers() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let database = try await TestPostgres.database()
        var sources: [Data] = []
        for index in 0..<50 {
            sources.append(try server.makeFile("f\(index).bin", size: 20_000 + index * 131, seed: UInt64(index + 1)))
        }
        let count = 5_000
        let list = work.appendingPathComponent("list.txt")
        try (0..<count).map { "\(server.url("f\($0 % 50).bin?n=\($0)").absoluteString)\n  out=\($0).bin\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        let queued = try await haul(["--queue", database, "-i", list.path], in: work)
        #expect(queued.status == 0, "\(queued.stderr)")
        #expect(queued.stderr.contains("queued 5000 downloads in postgres://haul@127.0.0.1:"))
        let again = try await haul(["--queue", database, "-i", list.path], in: work)
        #expect(again.stderr.contains("queued 0 downloads (5000 were there already)"))

        let output = work.appendingPathComponent("out")
        var workers: [ChildProcess] = []
        defer { Self.killStillRunning(workers) }  // a failed expectation must not leave workers behind
        for index in 1...3 {
            let arguments = [
                // No --state: the three share <out>/.haul/workers, each in a folder of its own.
                "worker", "--queue", database, "-o", output.path, "-j", "8", "--lease", "3", "--name", "w\(index)",
            ]
            workers.append(
                try ChildProcess(
                    Self.haulPath,
                    arguments,
                    stderr: work.appendingPathComponent("worker-\(index).log").path
                )
            )
        }
        _ = try await waitForQueue(database) { $0[.completed, default: 0] >= 1_000 }
        workers[1].signal(SIGKILL)
        #expect(await workers[1].exited() == 128 + SIGKILL)
        // What it held when it died: those rows, and only those, are claimed a second time.
        let held = Set(
            try PostgresConnection(database).query(
                "SELECT id FROM haul_downloads WHERE owner = 'w2' AND state = 'running'"
            ).compactMap { $0[0] }
        )
        #expect(!held.isEmpty && held.count <= 8, "the killed worker held \(held.count)")
        let counts = try await waitForQueue(database) { $0[.queued, default: 0] + $0[.running, default: 0] == 0 }
        #expect(counts == [.completed: count])
        for index in [0, 2] {
            workers[index].signal(SIGTERM)
            #expect(await workers[index].exited() == 143)
        }

        for index in 0..<count {
            let file = try Data(contentsOf: output.appendingPathComponent("\(index).bin"))
            #expect(file == sources[index % 50], "file \(index)")
        }
        // Completed once each; claimed twice exactly the rows the killed worker held, by the others.
        let rows = try PostgresConnection(database).query("SELECT id, attempts, finished_by, url FROM haul_downloads")
        #expect(rows.count == count)
        let retaken = rows.filter { $0[1] != "1" }
        #expect(Set(retaken.compactMap { $0[0] }) == held)
        #expect(retaken.allSatisfy { $0[1] == "2" && $0[2] != "w2" })
        #expect(Set(rows.compactMap { $0[2] }).isSuperset(of: ["w1", "w3"]))
        // nginx sent each URL whole once, and a second time only those rows' (begun by the killed one;
        // a partial or a file it placed is taken over by the next worker, through <out>/.haul/workers).
        var fetched: [String: Int] = [:]
        for entry in server.accessLog() where entry.uri.contains("?n=") && entry.status == 200 {
            fetched[entry.uri, default: 0] += 1
        }
        #expect(fetched.count == count)
        let heldURIs = Set(
            retaken.compactMap { $0[3].flatMap { URL(string: $0) }.map(server.loggedURI) }
        )
        for (uri, times) in fetched where times > 1 {
            #expect(times == 2 && heldURIs.contains(uri), "\(uri) fetched \(times) times")
        }
        // Resumed (206) only rows the killed worker held, never one nginx had not sent a part of.
        let resumed = server.accessLog().filter { $0.uri.contains("?n=") && $0.status == 206 }
        #expect(resumed.allSatisfy { heldURIs.contains($0.uri) }, "\(resumed.map(\.uri))")
        let sent = server.accessLog().filter { $0.uri.contains("?n=") }.reduce(Int64(0)) { $0 + $1.bytesSent }
        let whole = (0..<count).reduce(Int64(0)) { $0 + Int64(sources[$1 % 50].count) }
        print(
            "haul fleet test: the killed worker held \(held.count) rows; \(fetched.values.filter { $0 > 1 }.count) fetched"
                + " again whole, \(resumed.count) resumed, \(sent - whole) bytes re-sent"
        )
        // No worker wrote the database's password anywhere.
        for index in 1...3 {
            let log = try String(contentsOf: work.appendingPathComponent("worker-\(index).log"), encoding: .utf8)
            #expect(!log.contains(TestPostgres.password))
        }
    }

    /// SIGKILLs the workers a test leaves running (when an expectation failed before it stopped them).
    static func killStillRunning(_ workers: [ChildProcess]) {
        for worker in workers where worker.isRunning {
            worker.signal(SIGKILL)
            worker.wait()
        }
    }

    /// A worker process named `name`, its state in `work/state-<name>`, or in `shared/<name>` with
    /// `--shared-state`; `extra` arguments last.
    func startWorker(
        _ name: String,
        _ database: String,
        into output: URL,
        work: URL,
        lease: String = "2",
        state mode: WorkerState = .own,
        extra: [String] = []
    ) throws -> ChildProcess {
        let state: [String]
        switch mode {
        case .own: state = ["--state", work.appendingPathComponent("state-\(name)").path]
        case .shared(let folder): state = ["--shared-state", folder.path]
        case .byDefault: state = []
        }
        return try ChildProcess(
            Self.haulPath,
            ["worker", "--queue", database, "-o", output.path, "-j", "4", "--lease", lease, "--name", name] + state
                + extra,
            stderr: work.appendingPathComponent("\(name).log").path
        )
    }

    /// Where a test's worker keeps its state: `--state` (its own), `--shared-state`, or neither
    /// (`<out>/.haul/workers/<name>`).
    enum WorkerState: Sendable {
        case own
        case shared(URL)
        case byDefault
    }

    @Test(
        "a download taken over from a killed worker: with shared state (given, or the default <out>/.haul/workers) it continues from the bytes left, with --state it starts over",
        arguments: ["shared", "own", "default"]
    )
    func takeOverBytes(mode: String) async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let database = try await TestPostgres.database()
        // /gated/: 1 MiB at once, then 1 KB/s without a Range (8 s for the rest: the kill lands
        // before it, and a worker that starts afresh waits no longer), at once with one.
        let size = 1024 * 1024 + 8 * 1024
        let source = try server.makeFile("big.bin", size: size, seed: 11)
        let list = work.appendingPathComponent("list.txt")
        try "\(server.url("gated/big.bin").absoluteString)\n  out=big.bin\n".write(
            to: list,
            atomically: true,
            encoding: .utf8
        )
        #expect(try await haul(["--queue", database, "-i", list.path], in: work).status == 0)
        let output = work.appendingPathComponent("out")
        let state: WorkerState =
            switch mode {
            case "shared": .shared(work.appendingPathComponent("shared"))
            case "own": .own
            default: .byDefault
            }
        let sharedState: Bool
        let firstState: URL
        switch state {
        case .own: (sharedState, firstState) = (false, work.appendingPathComponent("state-w1"))
        case .shared(let folder): (sharedState, firstState) = (true, folder.appendingPathComponent("w1"))
        case .byDefault: (sharedState, firstState) = (true, output.appendingPathComponent(".haul/workers/w1"))
        }
        let first = try startWorker("w1", database, into: output, work: work, state: state)
        defer { Self.killStillRunning([first]) }
        // Killed once its partial file holds half a MiB (the first MiB comes at once) and its journal
        // has committed the accepted answer (its length and validator): bytes of a loop turn whose
        // commit a kill cut off are, by design, not continued by anyone.
        let partialLength = {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: firstState.path)) ?? []
            return names.first { $0.hasSuffix(".part") }.flatMap {
                (try? FileManager.default.attributesOfItem(atPath: firstState.appendingPathComponent($0).path))?[.size]
                    as? Int
            } ?? 0
        }
        let deadline = ContinuousClock.now + .seconds(20)
        let accepted = {
            ((try? DownloadManager.journalEntries(stateDirectory: firstState)) ?? []).contains { $0.totalBytes != nil }
        }
        while partialLength() < 512 * 1024 || !accepted(), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(partialLength() >= 512 * 1024 && accepted())
        first.signal(SIGKILL)
        #expect(await first.exited() == 128 + SIGKILL)
        // --quiet: nothing but errors, not even the note that it continues another worker's bytes.
        let second = try startWorker("w2", database, into: output, work: work, state: state, extra: ["--quiet"])
        defer { Self.killStillRunning([second]) }
        #expect(try await waitForQueue(database) { $0[.completed, default: 0] == 1 } == [.completed: 1])
        second.signal(SIGTERM)
        #expect(await second.exited() == 143)

        #expect(try Data(contentsOf: output.appendingPathComponent("big.bin")) == source)
        let rows = try PostgresConnection(database).query("SELECT attempts, finished_by FROM haul_downloads")
        #expect(rows.count == 1 && rows[0] == ["2", "w2"], "\(rows)")
        let requests = await server.requests(to: "/gated/big.bin", atLeast: 2)
        #expect(requests.count == 2)
        let again = try #require(requests.last)
        if sharedState {
            // From where the killed worker's partial file ended, for the rest only.
            let start = Int64(again.range.dropFirst("bytes=".count).dropLast()) ?? -1
            #expect(again.range.hasPrefix("bytes=") && start >= 512 * 1024, "range \(again.range)")
            #expect(again.ifRange != "-")
            #expect(again.status == 206)
            #expect(again.bytesSent == Int64(size) - start)
            let log = try String(contentsOf: work.appendingPathComponent("w2.log"), encoding: .utf8)
            #expect(try DownloadManager.journalEntries(stateDirectory: firstState).isEmpty, "w2: \(log)")
            #expect(log.isEmpty, "w2 --quiet printed: \(log)")
        } else {
            #expect(again.range == "-" && again.status == 200 && again.bytesSent == Int64(size))
            // The bytes stay behind in the killed worker's own directory.
            #expect(partialLength() >= 512 * 1024)
        }
    }

    @Test("three workers with --per-host 3 over two hosts: never more than 3 of a host running, sampled all along")
    func fleetWidePerHostLimit() async throws {
        let (server, work) = try await startServerAndDirectory(
            own: "its URLs are written by hand, for two host names, from the port"
        )
        defer { stop(server, work) }
        let database = try await TestPostgres.database()
        let source = try server.makeFile("p.bin", size: 100_000, seed: 3)  // 0.2 s each at 512 KB/s
        // Two hosts for one nginx: 127.0.0.1 and localhost.
        let hosts = ["127.0.0.1", "localhost"]
        let list = work.appendingPathComponent("list.txt")
        try (0..<60).map { "http://\(hosts[$0 % 2]):\(server.port)/slow/p.bin?n=\($0)\n  out=\($0).bin\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        #expect(try await haul(["--queue", database, "-i", list.path], in: work).status == 0)
        let output = work.appendingPathComponent("out")
        let workers = try ["a", "b", "c"].map {
            // -j 8 each: 24 places, 30 rows of each host.
            try startWorker($0, database, into: output, work: work, lease: "30", extra: ["-j", "8", "--per-host", "3"])
        }
        defer { Self.killStillRunning(workers) }
        // Sampled until every row is completed: the running rows of each host.
        let monitor = try PostgresConnection(database)
        var highest: [String: Int] = [:]
        var samples = 0
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let rows = try monitor.query("SELECT host, state, count(*) FROM haul_downloads GROUP BY host, state")
            samples += 1
            for row in rows where row[1] == "running" {
                let host = row[0] ?? ""
                highest[host] = max(highest[host] ?? 0, Int(row[2] ?? "") ?? 0)
            }
            if rows.allSatisfy({ $0[1] == "completed" }) { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        for worker in workers {
            worker.signal(SIGTERM)
            #expect(await worker.exited() == 143)
        }
        let hostKeys = hosts.map { "\($0):\(server.port)" }
        // Never above the limit, and the limit was used in full (24 places among three workers).
        #expect(
            highest == [hostKeys[0]: 3, hostKeys[1]: 3],
            "highest running per host in \(samples) samples: \(highest)"
        )
        #expect(try await waitForQueue(database) { _ in true } == [.completed: 60])
        for index in 0..<60 {
            #expect(try Data(contentsOf: output.appendingPathComponent("\(index).bin")) == source)
        }
    }

    @Test("a hung worker (SIGSTOP) loses its rows to another; woken, it records nothing and stops those transfers")
    func hungWorker() async throws {
        let (server, work) = try startFaultServerAndDirectory()
        defer { stop(server, work) }
        let database = try await TestPostgres.database()
        // The fault server's gate holds each answer after 256 KiB until the test opens it: the hung
        // worker's four transfers cannot end before it is stopped, however late (before: 3 s each at
        // 512 KB/s, a rate chosen to be slow enough); the other worker's run once it is open.
        let source = FaultServer.body(size: 1_500_000)
        let list = work.appendingPathComponent("list.txt")
        try (0..<4).map { "\(server.url("gate/262144/1500000?n=\($0)").absoluteString)\n  out=\($0).bin\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        #expect(try await haul(["--queue", database, "-i", list.path], in: work).status == 0)
        let output = work.appendingPathComponent("out")
        let hung = try startWorker("hung", database, into: output, work: work)
        defer { Self.killStillRunning([hung]) }
        _ = try await waitForQueue(database) { $0[.running, default: 0] == 4 }
        hung.signal(SIGSTOP)
        server.openGate()
        let other = try startWorker("other", database, into: output, work: work)
        defer { Self.killStillRunning([other]) }
        #expect(try await waitForQueue(database) { $0[.completed, default: 0] == 4 } == [.completed: 4])
        hung.signal(SIGCONT)
        // Awake, its next renewal finds every lease gone: it stops those transfers and records nothing.
        let log = work.appendingPathComponent("hung.log")
        try await waitForFile(log) { $0.components(separatedBy: "a lease was taken over").count - 1 == 4 }
        for process in [hung, other] {
            process.signal(SIGTERM)
            #expect(await process.exited() == 143)
        }
        let rows = try PostgresConnection(database).query("SELECT finished_by, attempts FROM haul_downloads")
        #expect(rows.count == 4 && rows.allSatisfy { $0[0] == "other" && $0[1] == "2" }, "\(rows)")
        for index in 0..<4 {
            #expect(try Data(contentsOf: output.appendingPathComponent("\(index).bin")) == source)
        }
        // Its transfers were cancelled: no partial file of theirs is left in its state directory.
        let left = try FileManager.default.contentsOfDirectory(atPath: work.appendingPathComponent("state-hung").path)
        #expect(!left.contains { $0.hasSuffix(".part") }, "\(left)")
    }

    @Test("PostgreSQL stopped and started again mid-run: the workers wait for it and finish")
    func databaseRestart() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let cluster = try await TestPostgres.Cluster.start()  // its own: other tests keep theirs
        let database = try await cluster.database()
        var sources: [Data] = []
        for index in 0..<20 {
            sources.append(try server.makeFile("f\(index).bin", size: 30_000 + index, seed: UInt64(index + 5)))
        }
        let count = 600
        let list = work.appendingPathComponent("list.txt")
        try (0..<count).map { "\(server.url("f\($0 % 20).bin?n=\($0)").absoluteString)\n  out=\($0).bin\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        #expect(try await haul(["--queue", database, "-i", list.path], in: work).status == 0)
        let output = work.appendingPathComponent("out")
        let workers = try ["a", "b"].map { try startWorker($0, database, into: output, work: work, lease: "30") }
        defer { Self.killStillRunning(workers) }
        _ = try await waitForQueue(database) { $0[.completed, default: 0] >= 200 }
        try await cluster.down()
        for name in ["a", "b"] {
            try await waitForFile(work.appendingPathComponent("\(name).log")) { $0.contains("cannot be reached") }
        }
        try await cluster.up()
        #expect(try await waitForQueue(database) { $0[.completed, default: 0] == count } == [.completed: count])
        for worker in workers {
            worker.signal(SIGTERM)
            #expect(await worker.exited() == 143)
        }
        for index in 0..<count {
            #expect(try Data(contentsOf: output.appendingPathComponent("\(index).bin")) == sources[index % 20])
        }
        let log = try String(contentsOf: work.appendingPathComponent("a.log"), encoding: .utf8)
        #expect(!log.contains(TestPostgres.password))
    }

    /// Waits until `file`'s text satisfies `done`, reading it again every 50 ms, for at most 60 s
    /// (a worker's log: a process of its own, with no other way to say what it did).
    func waitForFile(_ file: URL, until done: (String) -> Bool) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(60)
        while !done((try? String(contentsOf: file, encoding: .utf8)) ?? "") {
            guard clock.now < deadline else {
                throw TestFailure(
                    "\(file.lastPathComponent) never showed it: \((try? String(contentsOf: file, encoding: .utf8)) ?? "")"
                )
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test("haul worker --until-empty exits 0 once nothing is left for it; --pause, --resume, --wait and --cancel by id")
    func workerUntilEmpty() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let database = try await TestPostgres.database()
        let source = try server.makeFile("u.bin", size: 50_000, seed: 11)
        let list = work.appendingPathComponent("list.txt")
        try (0..<20).map { "\(server.url("u.bin?n=\($0)").absoluteString)\n  out=sub/\($0).bin\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        #expect(try await haul(["--queue", database, "-i", list.path, "-o", "batch"], in: work).status == 0)
        // One of them paused by id (ids from --list --json): the worker leaves it.
        let json = try await haul(["--queue", database, "--list", "--json"], in: work).stdout
        let line = try #require(
            json.split(separator: "\n").first {
                $0.contains("\"batch\\/sub\\/7.bin\"") || $0.contains("\"batch/sub/7.bin\"")
            }
        )
        let id = try #require(
            (try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? String
        )
        #expect(try await haul(["--queue", database, "--pause", id], in: work).status == 0)
        let output = work.appendingPathComponent("out")
        let worker = ["worker", "--queue", database, "-o", output.path, "--until-empty", "--quiet"]
        let run = try await haul(worker, in: work)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: output.appendingPathComponent("batch/sub/7.bin").path))
        // Resumed, then fetched by the next worker; --wait reports it.
        #expect(try await haul(["--queue", database, "--resume", id], in: work).status == 0)
        #expect(try await haul(worker, in: work).status == 0)
        let waited = try await haul(["--queue", database, "--wait", id], in: work)
        #expect(waited.status == 0 && waited.stdout == "completed  batch/sub/7.bin\n", "\(waited.stdout)")
        for index in 0..<20 {
            #expect(try Data(contentsOf: output.appendingPathComponent("batch/sub/\(index).bin")) == source)
        }
        let unknown = try await haul(["--queue", database, "--cancel", "0123"], in: work)
        #expect(unknown.status == 1 && unknown.stderr.contains("no download 0123 to cancel in postgres://haul@"))
        // The password from libpq's PGPASSWORD, not the command line (where `ps` shows it).
        let withoutPassword = database.replacingOccurrences(of: ":\(TestPostgres.password)@", with: "@")
        #expect(!withoutPassword.contains(TestPostgres.password))
        let listed = try await haul(
            ["--queue", withoutPassword, "--list"],
            in: work,
            environment: ["PGPASSWORD": TestPostgres.password]
        )
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.split(separator: "\n").filter { $0.hasPrefix("completed") }.count == 20)
        #expect(listed.stdout.contains("-> batch/sub/0.bin"))
    }
}

/// Issue 56, item 6: the workers carry what a shared queue cannot: headers, cookies, users and
/// passwords of their own, sent to each URL's origin, stored in neither the queue nor the journal.
extension FleetProcessTests {
    @Test("haul worker -H @FILE, -b and --netrc-file fetch what needs them; no secret in the queue, a journal or a log")
    func workerCredentials() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let database = try await TestPostgres.database()
        var sources: [String: Data] = [:]
        for (index, name) in ["b.bin", "c.bin", "p.bin"].enumerated() {
            sources[name] = try server.makeFile(name, size: 40_000, seed: UInt64(56 + index))
        }
        let output = work.appendingPathComponent("out")
        let headers = work.appendingPathComponent("headers.txt")
        try "Authorization: Bearer \(NginxServer.bearer)\n".write(to: headers, atomically: true, encoding: .utf8)
        let netrc = work.appendingPathComponent("netrc")
        try "machine 127.0.0.1 login alice password \(NginxServer.password)\n"
            .write(to: netrc, atomically: true, encoding: .utf8)
        #expect(chmod(netrc.path, 0o600) == 0)  // a netrc others can read is not used
        var runs: [HaulBinary.Run] = []
        // The bearer and the cookie by one worker; basic auth from a netrc file by another.
        for (paths, options) in [
            (["bearer/b.bin", "cookie/c.bin"], ["-H", "@\(headers.path)", "-b", "session=\(NginxServer.cookie)"]),
            (["private/p.bin"], ["--netrc-file", netrc.path]),
        ] {
            let queued = try await haul(["--queue", database] + paths.map { server.url($0).absoluteString }, in: work)
            #expect(queued.status == 0, "\(queued.stderr)")
            let run = try await haul(
                ["worker", "--queue", database, "-o", output.path, "--until-empty"] + options,
                in: work
            )
            #expect(run.status == 0, "\(run.stderr)")
            runs.append(run)
        }
        let listed = try await haul(["--queue", database, "--list", "--json"], in: work)
        #expect(
            listed.stdout.split(separator: "\n").filter { $0.contains("\"completed\"") }.count == 3,
            "\(listed.stdout)"
        )
        for (name, source) in sources {
            #expect(try Data(contentsOf: output.appendingPathComponent(name)) == source)
        }
        // Each answered 200 (not 401): the worker sent what the location asks for.
        for path in ["/bearer/b.bin", "/cookie/c.bin", "/private/p.bin"] {
            #expect(await server.requests(to: path, atLeast: 1).map(\.status) == [200], "\(path)")
        }
        let rows = try PostgresConnection(database).query("SELECT * FROM haul_downloads")
        for secret in [NginxServer.bearer, NginxServer.cookie, NginxServer.password] {
            #expect(!"\(rows)".contains(secret))
            #expect(!listed.stdout.contains(secret))
            expectNowhere(secret, under: output, or: runs.flatMap { [$0.stdout, $0.stderr] })
        }
    }
}

/// Issue 56, item 8: an outage of PostgreSQL longer than the leases does not make the live workers
/// take each other's downloads: after a restart no lease expires until the server has run a
/// lease's length, and a worker back from an outage renews what it holds before it claims. A worker
/// tries the database again at least every third of a lease, so that it is back within that length
/// (with 1 s leases, a wait of 3.2 s once let the other worker requeue its four downloads and fetch
/// them again: one run in ten).
extension FleetProcessTests {
    @Test(
        "PostgreSQL down for three times the lease while every download runs: none is taken over, each URL asked for once"
    )
    func outageLongerThanLease() async throws {
        let (server, work) = try startFaultServerAndDirectory()
        defer { stop(server, work) }
        let cluster = try await TestPostgres.Cluster.start()  // its own: other tests keep theirs
        let database = try await cluster.database()
        // The fault server's gate holds each answer after 256 KiB until PostgreSQL is back: both
        // workers hold leases (four downloads each) and all eight run through the outage, however
        // loaded the machine (before: 3 MB at 512 KB/s, about 6 s each, a rate chosen to be slow enough).
        let source = FaultServer.body(size: 3_000_000)
        let paths = (0..<8).map { "/gate/262144/3000000?o=\($0)" }
        let list = work.appendingPathComponent("list.txt")
        try (0..<8).map { "\(server.url(String(paths[$0].dropFirst())).absoluteString)\n  out=\($0).bin\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        #expect(try await haul(["--queue", database, "-i", list.path], in: work).status == 0)
        let output = work.appendingPathComponent("out")
        let workers = try ["a", "b"].map { try startWorker($0, database, into: output, work: work, lease: "1") }
        defer { Self.killStillRunning(workers) }
        _ = try await waitForQueue(database) { $0[.running, default: 0] == 8 }
        try await cluster.down()
        for name in ["a", "b"] {
            try await waitForFile(work.appendingPathComponent("\(name).log")) { $0.contains("cannot be reached") }
        }
        // The outage is the scenario: it lasts past every lease (1 s) before the server is back, and
        // 3 s is where a worker that waited up to 5 s between tries came back too late most often
        // (with 1 s leases: 4 runs of 6 between 2.8 and 3 s failed, 0 of 12 between 2 and 2.6 s).
        try await Task.sleep(for: .seconds(3))
        try await cluster.up()
        server.openGate()
        #expect(try await waitForQueue(database) { $0[.completed, default: 0] == 8 } == [.completed: 8])
        for worker in workers {
            worker.signal(SIGTERM)
            #expect(await worker.exited() == 143)
        }
        for index in 0..<8 {
            #expect(try Data(contentsOf: output.appendingPathComponent("\(index).bin")) == source)
        }
        // Before: the first worker back requeued and claimed every expired lease, its own and the
        // other's; their transfers were cancelled and fetched again.
        for path in paths {
            let asked = server.requests(to: path)
            #expect(asked.count == 1, "\(path): \(asked.map(\.status))")
        }
        // Nor did a worker back first requeue the other's leases before it could renew them (its
        // outcomes then come too late: "an outcome came after the lease was taken over").
        for name in ["a", "b"] {
            let log = try String(contentsOf: work.appendingPathComponent("\(name).log"), encoding: .utf8)
            #expect(!log.contains("taken over"), "\(name): \(log)")
        }
    }
}

/// Issue 74, item 6: `--queue` and `haul worker` exit by the table's classes, as `haul` does: a
/// database whose host does not resolve (3), that nothing answers for (4), that refuses the login
/// (2); `--wait` for a download that failed exits with its failure's class (a 404: 2, a refused
/// port: 4), not 1 for all.
extension FleetProcessTests {
    @Test(
        "--queue and worker exit by class: an unknown database host 3, a refused port 4, a wrong password 2; --wait by the failure's class"
    )
    func exitClasses() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let database = try await TestPostgres.database()
        let freePort = try NginxServer.freePort()
        let wrongPassword = database.replacingOccurrences(of: ":\(TestPostgres.password)@", with: ":not-the-password@")
        #expect(wrongPassword != database)
        let cases: [(String, Int32)] = [
            ("postgres://haul@no-such-host.invalid/haul?connect_timeout=5", 3),
            ("postgres://haul@127.0.0.1:\(freePort)/haul?connect_timeout=5", 4),
            (wrongPassword, 2),
        ]
        for (connection, status) in cases {
            let listed = try await haul(["--queue", connection, "--list"], in: work)
            #expect(listed.status == status, "\(connection): \(listed.stderr)")
            let worker = try await haul(
                [
                    "worker", "--queue", connection, "-o", work.appendingPathComponent("w").path, "--until-empty",
                    "--quiet",
                ],
                in: work
            )
            #expect(worker.status == status, "worker on \(connection): \(worker.stderr)")
            #expect(!listed.stderr.contains("not-the-password") && !worker.stderr.contains("not-the-password"))
        }
        // Two downloads that fail: a 404 and a refused port.
        let refused = "http://127.0.0.1:\(freePort)/r.bin"
        let list = work.appendingPathComponent("failing.txt")
        try "\(server.url("missing.bin").absoluteString)\n  out=exit/missing.bin\n\(refused)\n  out=exit/refused.bin\n"
            .write(to: list, atomically: true, encoding: .utf8)
        #expect(try await haul(["--queue", database, "-i", list.path], in: work).status == 0)
        let output = work.appendingPathComponent("out-exit")
        let ran = try await haul(
            ["worker", "--queue", database, "-o", output.path, "--until-empty", "--quiet"],
            in: work
        )
        #expect(ran.status == 0, "\(ran.stderr)")
        let json = try await haul(["--queue", database, "--list", "--json"], in: work).stdout
        func id(of path: String) throws -> String {
            let line = try #require(
                json.split(separator: "\n").first {
                    $0.contains(path) || $0.contains(path.replacingOccurrences(of: "/", with: "\\/"))
                }
            )
            return try #require(
                (try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? String
            )
        }
        let missing = try await haul(["--queue", database, "--wait", try id(of: "exit/missing.bin")], in: work)
        #expect(missing.status == 2, "before: 1. \(missing.stdout) \(missing.stderr)")
        #expect(missing.stdout.hasPrefix("failed  exit/missing.bin"), "\(missing.stdout)")
        let unreachable = try await haul(["--queue", database, "--wait", try id(of: "exit/refused.bin")], in: work)
        #expect(unreachable.status == 4, "before: 1. \(unreachable.stdout) \(unreachable.stderr)")
    }
}
