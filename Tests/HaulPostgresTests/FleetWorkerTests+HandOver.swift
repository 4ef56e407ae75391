import Foundation
import Haul
import Testing

@testable import HaulPostgres
@testable import HaulTestSupport

extension FleetWorkerTests {
    @Test(
        "a worker that still runs when its lease is taken hands its bytes over: the taker continues from them, nothing fetched twice (issue 56, item 8)",
        .timeLimit(.minutes(2))
    )
    func lostLeaseHandsBytesOver() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let database = try await TestPostgres.database()
        // /gated/: the first request gets 1 MiB at once, then 1 KB/s; a range request runs free. A
        // taker that started over would take 1,000 s for the rest.
        let source = try server.makeFile("big.bin", size: 2 * 1024 * 1024, seed: 31)
        let shared = directory.appendingPathComponent("shared")
        // Under the workers' output folder, the shared one (the test's helper puts it there).
        let request = DownloadRequest(
            url: server.url("gated/big.bin"),
            destination: shared.appendingPathComponent("big.bin")
        )
        let states = ["a", "b"].compactMap { FleetWorker.stateDirectory(in: shared, worker: $0) }
        // A renews every 2 s: the row is taken from it between two renewals, as from a worker that
        // missed them (a partition, a pause of the process).
        let a = try await worker(
            database,
            name: "a",
            state: states[0],
            concurrency: 1,
            lease: .seconds(6),
            shared: shared
        )
        let b = try await worker(
            database,
            name: "b",
            state: states[1],
            concurrency: 1,
            lease: .seconds(6),
            shared: shared
        )
        try await a.queue.enqueue([request])
        var events = a.manager.events.makeAsyncIterator()
        let runningA = Task { try await a.run() }
        var receiving: Download?
        while receiving == nil, let next = await events.next() {
            if case .progress(let progress) = next.event, next.id == request.id, progress.bytesReceived >= 1024 * 1024 {
                receiving = next.download
            }
        }
        let download = try #require(receiving)
        // The lease runs out (what requeueing an expired lease does), and B, running, claims it.
        try PostgresConnection(database).query(
            """
            UPDATE haul_downloads SET state = 'queued', owner = NULL, lease_expires = NULL, lease_expired = true
            WHERE id = $1
            """,
            [request.id.rawValue]
        )
        var eventsB = b.manager.events.makeAsyncIterator()
        let runningB = Task { try await b.run() }
        // B's first progress counts A's bytes: it continued them. (Started over, it would take
        // 1,000 s at the gate: it is cancelled, and the test fails here.)
        var first: DownloadProgress?
        while first == nil, let next = await eventsB.next() {
            if case .progress(let progress) = next.event, next.id == request.id { first = progress }
        }
        let continued = (first?.bytesReceived ?? 0) >= 1024 * 1024
        #expect(continued, "B's first progress: \(first.map { "\($0.bytesReceived)" } ?? "none")")
        if !continued { try await b.queue.cancel(request.id) }
        #expect(try await drained(database) == [.completed: 1])
        #expect(try Data(contentsOf: request.destination) == source)
        let entry = try #require(try await b.queue.entry(request.id))
        #expect(entry.finishedBy == "b" && entry.attempts == 2)
        // A stopped it, handed it over and forgot it; B continued from A's bytes, with a range.
        #expect(download.state == .cancelled)
        #expect(a.manager.journalEntry(id: request.id) == nil)
        let handOver = states[0].appendingPathComponent("handover")
        #expect(DownloadManager.journalEntry(id: request.id, stateDirectory: handOver) == nil)
        let fetched = server.accessLog().filter { $0.uri == "/gated/big.bin" }
        #expect(fetched.count == 2, "\(fetched.map(\.range))")
        #expect(fetched.first?.range == "-")
        let resumedAt = fetched.last.flatMap { Int64($0.range.dropFirst(6).dropLast()) } ?? 0
        #expect(fetched.last?.status == 206 && resumedAt >= 1024 * 1024, "\(fetched.map(\.range))")
        for task in [runningA, runningB] { task.cancel() }
        for task in [runningA, runningB] { try await task.value }
        for worker in [a, b] { await worker.manager.shutdown() }
    }

    @Test(
        "bytes a worker handed over that nobody took leave its hand-over folder after two sweeps, a taker's longest wait apart",
        .timeLimit(.minutes(1))
    )
    func unclaimedHandOverIsSwept() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let database = try await TestPostgres.database()
        _ = try server.makeFile("s.bin", size: 2 * 1024 * 1024, seed: 32)
        let shared = directory.appendingPathComponent("shared")
        let request = DownloadRequest(
            url: server.url("gated/s.bin"),
            destination: shared.appendingPathComponent("s.bin")
        )
        let state = try #require(FleetWorker.stateDirectory(in: shared, worker: "a"))
        let handOver = state.appendingPathComponent("handover")
        // What an earlier run of worker a handed over before it stopped, and nobody took.
        var configuration = DownloadManager.Configuration.forTests()
        configuration.stateDirectory = directory.appendingPathComponent("earlier")
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(request)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
            await events.pause(download)
            #expect(try manager.handOver([request.id], to: handOver).count == 1)
        }
        let partial = handOver.appendingPathComponent("\(request.id).part").path
        #expect(FileManager.default.fileExists(atPath: partial))
        let a = try await worker(database, name: "a", state: state, concurrency: 1, lease: .seconds(1), shared: shared)
        let clock = ContinuousClock()
        let started = clock.now
        let running = Task { try await a.run() }
        // Swept every two leases (2 s): seen at the first sweep, removed at the second.
        while DownloadManager.journalEntry(id: request.id, stateDirectory: handOver) != nil {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(clock.now - started >= .seconds(4))
        #expect(!FileManager.default.fileExists(atPath: partial))
        running.cancel()
        try await running.value
        await a.manager.shutdown()
    }
}
