import Foundation
import Haul
import Testing

@testable import HaulPostgres
@testable import HaulTestSupport

/// Workers (each a DownloadManager with its own state directory) sharing one PostgreSQL queue,
/// downloading from a real nginx.
@Suite("Fleet workers (PostgreSQL, nginx)")
struct FleetWorkerTests {
    func queueConfiguration(_ database: String, _ name: String, _ folder: URL) -> FleetQueue.Configuration {
        var configuration = FleetQueue.Configuration(connectionString: database, worker: name)
        configuration.outputFolder = folder
        return configuration
    }

    func worker(
        _ database: String,
        name: String,
        state: URL,
        concurrency: Int = 4,
        lease: Duration = .seconds(30),
        shared: URL? = nil
    ) async throws -> FleetWorker {
        var queueConfiguration = FleetQueue.Configuration(connectionString: database, worker: name)
        queueConfiguration.leaseDuration = lease
        // Each test's rows are under its folder, beside the state directory.
        queueConfiguration.outputFolder = state.deletingLastPathComponent()
        let queue = try await FleetQueue(configuration: queueConfiguration)
        var configuration = DownloadManager.Configuration.forTests()
        configuration.stateDirectory = state
        return FleetWorker(
            queue: queue,
            manager: try DownloadManager(configuration: configuration),
            concurrency: concurrency,
            sharedStateDirectory: shared,
            pollInterval: .milliseconds(50)
        )
    }

    /// Waits until no row is queued or running: looks again at each completion or failure
    /// announced on `haul_downloads` (and at least once a second, in case one came between a look
    /// and the wait).
    func drained(_ database: String) async throws -> [FleetState: Int] {
        let listener = try PostgresConnection(database)
        try listener.query("LISTEN haul_downloads")
        let queue = try await FleetQueue(configuration: .init(connectionString: database, worker: "observer"))
        while true {
            try Task.checkCancellation()  // a time limit ends it
            let counts = try await queue.counts()
            if counts[.queued, default: 0] + counts[.running, default: 0] == 0 { return counts }
            try await TestPostgres.waitForNotification(on: listener, upTo: 1000)
        }
    }

    @Test("two workers share 60 downloads: every file whole, every row completed once, each file fetched once")
    func twoWorkers() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let database = try await TestPostgres.database()
        var sources: [Data] = []
        for index in 0..<6 {
            sources.append(try server.makeFile("f\(index).bin", size: 100_000 + index * 7_919, seed: UInt64(index + 1)))
        }
        let requests = (0..<60).map { index in
            DownloadRequest(
                url: server.url("f\(index % 6).bin?copy=\(index)"),
                destination: directory.appendingPathComponent("out/\(index).bin")
            )
        }
        let workers = try await [
            worker(database, name: "one", state: directory.appendingPathComponent("state-one")),
            worker(database, name: "two", state: directory.appendingPathComponent("state-two")),
        ]
        #expect(try await workers[0].queue.enqueue(requests) == 60)
        let running = workers.map { worker in Task { try await worker.run() } }
        let counts = try await drained(database)
        for task in running { task.cancel() }
        for task in running { try await task.value }
        #expect(counts == [.completed: 60])
        for index in 0..<60 {
            let file = try Data(contentsOf: directory.appendingPathComponent("out/\(index).bin"))
            #expect(file == sources[index % 6], "file \(index)")
            let entry = try #require(try await workers[0].queue.entry(requests[index].id))
            #expect(entry.attempts == 1 && entry.bytes == Int64(sources[index % 6].count))
        }
        // Both took part, and nginx sent each URL whole, once.
        let finishers = try PostgresConnection(database).query(
            "SELECT finished_by, count(*) FROM haul_downloads GROUP BY finished_by ORDER BY finished_by"
        )
        #expect(finishers.map { $0[0] } == ["one", "two"], "\(finishers)")
        let fetched = server.accessLog().filter { $0.uri.contains("copy=") && $0.status == 200 }
        #expect(fetched.count == 60)
        #expect(Set(fetched.map(\.uri)).count == 60)
        for worker in workers { await worker.manager.shutdown() }
    }

    @Test(
        "a download that fails for good (a 404) is recorded failed with its reason; the others complete; until-empty returns"
    )
    func failuresAreRecorded() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let database = try await TestPostgres.database()
        let source = try server.makeFile("here.bin", size: 30_000, seed: 9)
        let requests = [
            DownloadRequest(url: server.url("here.bin"), destination: directory.appendingPathComponent("out/a.bin")),
            DownloadRequest(url: server.url("missing.bin"), destination: directory.appendingPathComponent("out/b.bin")),
            DownloadRequest(url: server.url("here.bin?2"), destination: directory.appendingPathComponent("out/c.bin")),
        ]
        let worker = try await worker(database, name: "w", state: directory.appendingPathComponent("state"))
        #expect(try await worker.queue.enqueue(requests) == 3)
        try await worker.run(untilEmpty: true)
        #expect(try await worker.queue.counts() == [.completed: 2, .failed: 1])
        let failed = try #require(try await worker.queue.entry(requests[1].id))
        #expect(failed.state == .failed && failed.finishedBy == "w")
        #expect(failed.lastError?.contains("404") == true, "\(failed.lastError ?? "")")
        #expect(!FileManager.default.fileExists(atPath: requests[1].destination.path))
        for index in [0, 2] {
            #expect(try Data(contentsOf: requests[index].destination) == source)
        }
        await worker.manager.shutdown()
    }

    @Test("a dead worker's rows are taken over when its leases expire; its late completions change nothing")
    func takeover() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let database = try await TestPostgres.database()
        let source = try server.makeFile("t.bin", size: 300_000, seed: 9)
        let requests = (0..<10).map { index in
            DownloadRequest(
                url: server.url("t.bin?n=\(index)"),
                destination: directory.appendingPathComponent("out/\(index).bin")
            )
        }
        // A worker that claims four rows and then does nothing (killed, hung), and whose leases run out.
        let dead = try await FleetQueue(configuration: queueConfiguration(database, "dead", directory))
        // Leases granted while the server runs (not carried over a restart): taken over once expired.
        try await TestPostgres.waitUntilServerHasRun(database, seconds: 3)
        try await dead.enqueue(requests)
        let abandoned = try await dead.claim(upTo: 4)
        #expect(abandoned.count == 4)
        try PostgresConnection(database).query(
            "UPDATE haul_downloads SET lease_expires = now() - interval '1 second' WHERE owner = 'dead'"
        )
        let live = try await worker(
            database,
            name: "live",
            state: directory.appendingPathComponent("state"),
            lease: .seconds(2)
        )
        let task = Task { try await live.run() }
        #expect(try await drained(database) == [.completed: 10])
        task.cancel()
        try await task.value
        for index in 0..<10 {
            #expect(try Data(contentsOf: directory.appendingPathComponent("out/\(index).bin")) == source)
        }
        for lease in abandoned {
            let entry = try #require(try await live.queue.entry(lease.id))
            #expect(entry.attempts == 2 && entry.leaseVersion == 2 && entry.state == .completed)
            #expect(entry.finishedBy == "live")
            #expect(try await dead.complete(lease, bytes: 1) == false)
        }
        #expect(try await live.queue.counts() == [.completed: 10])
        await live.manager.shutdown()
    }

    @Test("a worker whose lease is taken mid-transfer cancels its download and records nothing")
    func lostLease() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let database = try await TestPostgres.database()
        // /held/: 1 MiB at once, then 1 KB/s: still running when the thief comes, however late.
        _ = try server.makeFile("slow.bin", size: 2 * 1024 * 1024, seed: 3)
        let request = DownloadRequest(
            url: server.url("held/slow.bin"),
            destination: directory.appendingPathComponent("slow.bin")
        )
        // Renewals every 300 ms (a third of the lease).
        let worker = try await worker(
            database,
            name: "w",
            state: directory.appendingPathComponent("state"),
            lease: .milliseconds(900)
        )
        try await worker.queue.enqueue([request])
        var events = worker.manager.events.makeAsyncIterator()
        let task = Task { try await worker.run() }
        // Once it receives, another worker takes the row over (as after a partition).
        var download: Download?
        while download == nil, let next = await events.next() {
            if case .progress = next.event, next.id == request.id { download = next.download }
        }
        let receiving = try #require(download)
        // The thief's version: one past the worker's (a loaded machine may have let the worker's
        // lease expire and claimed the row again before: 2 was assumed, and once did not hold).
        let stolen = try PostgresConnection(database).query(
            "UPDATE haul_downloads SET owner = 'thief', lease_version = lease_version + 1,"
                // A thief that renews.
                + " lease_expires = now() + interval '1 hour' WHERE id = $1 RETURNING lease_version",
            [request.id.rawValue]
        )
        let thiefVersion = try #require(stolen.first?.first.flatMap { $0.flatMap { Int64($0) } })
        // Its next renewal finds the lease gone: the download is cancelled, nothing recorded.
        await #expect(throws: DownloadError.self) { _ = try await receiving.finished() }
        #expect(receiving.state == .cancelled)
        let entry = try #require(try await worker.queue.entry(request.id))
        #expect(entry.state == .running && entry.owner == "thief" && entry.leaseVersion == thiefVersion)
        #expect(!FileManager.default.fileExists(atPath: request.destination.path))
        task.cancel()
        try await task.value
        #expect(try await worker.queue.entry(request.id)?.owner == "thief")  // stopping released nothing of it
        await worker.manager.shutdown()
    }

    @Test("from another process: pause, resume and cancel a download, queued or running, and await its outcome")
    func controlFromAnywhere() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let database = try await TestPostgres.database()
        // /gated/: a first request gets 1 MiB at once, then 1 KB/s (still running when the test pauses
        // and cancels, however late); the resume (a range) runs at full speed.
        let source = try server.makeFile("slow.bin", size: 2_000_000, seed: 21)
        let requests = (0..<3).map { index in
            DownloadRequest(
                url: server.url("gated/slow.bin?n=\(index)"),
                destination: directory.appendingPathComponent("out/\(index).bin"),
                priority: 3 - index
            )
        }
        let control = try await FleetQueue(configuration: queueConfiguration(database, "control", directory))
        try await control.enqueue(requests)
        // Queued: paused, resumed and cancelled at once.
        #expect(try await control.pause(requests[2].id))
        #expect(try await control.entry(requests[2].id)?.state == .paused)
        #expect(try await control.resume(requests[2].id))
        #expect(try await control.cancel(requests[2].id))
        #expect(try await control.outcome(of: requests[2].id).state == .cancelled)
        #expect(try await control.resume(requests[2].id) == false)

        // Running: the worker learns at its next renewal (every 300 ms).
        let worker = try await worker(
            database,
            name: "w",
            state: directory.appendingPathComponent("state"),
            concurrency: 2,
            lease: .milliseconds(900)
        )
        var events = worker.manager.events.makeAsyncIterator()
        let task = Task { try await worker.run() }
        var receiving: Set<DownloadID> = []
        while receiving.count < 2, let next = await events.next() {
            if case .progress = next.event { receiving.insert(next.id) }
        }
        let waiting = Task { try await control.outcome(of: requests[0].id) }
        let announcements = try listener(database)
        #expect(try await control.pause(requests[0].id))
        #expect(try await control.cancel(requests[1].id))
        #expect(try await control.outcome(of: requests[1].id).state == .cancelled)
        var paused: FleetEntry?
        while paused?.state != .paused {
            try await TestPostgres.waitForNotification(on: announcements, upTo: 1000)
            paused = try await control.entry(requests[0].id)
        }
        #expect(paused?.finishedBy == "w")
        #expect(!FileManager.default.fileExists(atPath: requests[1].destination.path))
        // Resumed: the same worker takes it again and continues from its bytes (a range request).
        #expect(try await control.resume(requests[0].id))
        let outcome = try await waiting.value
        #expect(outcome.state == .completed && outcome.bytes == Int64(source.count))
        #expect(try Data(contentsOf: requests[0].destination) == source)
        let ranges = server.accessLog().filter { $0.uri.hasSuffix("n=0") }.map(\.range)
        #expect(ranges.count == 2 && ranges[0] == "-" && ranges[1].hasPrefix("bytes="), "\(ranges)")
        task.cancel()
        try await task.value
        await worker.manager.shutdown()
    }

    func listener(_ database: String) throws -> PostgresConnection {
        let connection = try PostgresConnection(database)
        try connection.query("LISTEN haul_downloads")
        return connection
    }

    @Test(
        "rows aimed outside the output folder (.., absolute, .haul, a link out) are refused when queued and failed by the worker, nothing written"
    )
    func hostileRows() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let database = try await TestPostgres.database()
        let source = try server.makeFile("h.bin", size: 20_000, seed: 4)
        let output = directory.appendingPathComponent("out")
        let victim = directory.appendingPathComponent("victim")
        try FileManager.default.createDirectory(at: victim, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        try Data("victim's".utf8).write(to: victim.appendingPathComponent("x"))
        // A link inside the output folder that leads out of it.
        try FileManager.default.createSymbolicLink(
            atPath: output.appendingPathComponent("way-out").path,
            withDestinationPath: victim.path
        )
        // A link inside it to a folder inside it, which another user (nobody) made: not followed
        // either (issue 56, item 3; before: the file was written through it).
        let inner = output.appendingPathComponent("inner")
        try FileManager.default.createDirectory(at: inner, withIntermediateDirectories: true)
        #expect(symlink(inner.path, output.appendingPathComponent("planted").path) == 0)
        #expect(lchown(output.appendingPathComponent("planted").path, 65534, 65534) == 0)
        let worker = try await worker(database, name: "w", state: output.appendingPathComponent("state"))
        // Through the API: a destination in a state folder is refused at once.
        let intoState = DownloadRequest(
            url: server.url("h.bin"),
            destination: output.appendingPathComponent(".haul/journal.sqlite")
        )
        let refused = await #expect(throws: FleetError.self) {
            try await worker.queue.enqueue([intoState], relativeTo: output)
        }
        #expect("\(refused.map { "\($0)" } ?? "")".contains("state folder"))
        // Written into the table by anyone who can: the worker refuses each of these.
        let hostile = [
            victim.appendingPathComponent("x").path, "sub/../../victim/x", "../victim/x",
            ".haul/journal.sqlite", "way-out/x", "a/.haul/b", "planted/x",
        ]
        for (index, path) in hostile.enumerated() {
            try PostgresConnection(database).query(
                "INSERT INTO haul_downloads (id, url, destination, host, priority) VALUES ($1, $2, $3, $4, 0)",
                ["hostile\(index)", server.url("h.bin?n=\(index)").absoluteString, path, server.url("h.bin").hostKey]
            )
        }
        let fine = DownloadRequest(url: server.url("h.bin"), destination: output.appendingPathComponent("fine.bin"))
        #expect(try await worker.queue.enqueue([fine], relativeTo: output) == 1)
        try await worker.run(untilEmpty: true)
        let counts = try await worker.queue.counts()
        #expect(counts == [.completed: 1, .failed: hostile.count], "\(counts)")
        for index in hostile.indices {
            let entry = try #require(try await worker.queue.entry(DownloadID(rawValue: "hostile\(index)")))
            #expect(
                entry.state == .failed && entry.lastError?.hasPrefix("refused: its destination") == true,
                "\(entry.path): \(entry.state) \(entry.lastError ?? "")"
            )
        }
        #expect(try String(contentsOf: victim.appendingPathComponent("x"), encoding: .utf8) == "victim's")
        #expect(try FileManager.default.contentsOfDirectory(atPath: victim.path) == ["x"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: inner.path).isEmpty)
        #expect(try Data(contentsOf: output.appendingPathComponent("fine.bin")) == source)
        // The worker's own journal is whole: it lists what it did.
        let entries = try DownloadManager.journalEntries(stateDirectory: output.appendingPathComponent("state"))
        #expect(entries.map(\.state) == [.completed])
        await worker.manager.shutdown()
    }
}
