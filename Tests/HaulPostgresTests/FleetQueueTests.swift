import Foundation
import Haul
import Testing

@testable import HaulPostgres
@testable import HaulTestSupport

/// The fleet's queue against a real PostgreSQL (a cluster the tests start): claims, leases,
/// takeovers, fencing, the fleet-wide per-host limit, notifications and secrets.
@Suite("Fleet queue (PostgreSQL)")
struct FleetQueueTests {
    func requests(_ count: Int, host: String = "127.0.0.1:8080", priority: (Int) -> Int = { _ in 0 })
        -> [DownloadRequest]
    {
        (0..<count).map { index in
            DownloadRequest(
                url: URL(string: "http://\(host)/f\(index).bin")!,
                destination: URL(
                    fileURLWithPath: "/srv/out/\(host.replacingOccurrences(of: ":", with: "_"))/\(index).bin"
                ),
                priority: priority(index)
            )
        }
    }

    func queue(
        _ database: String,
        worker: String,
        perHost: Int? = nil,
        lease: Duration = .seconds(30)
    ) async throws -> FleetQueue {
        var configuration = FleetQueue.Configuration(connectionString: database, worker: worker)
        configuration.maxConcurrentDownloadsPerHost = perHost
        configuration.leaseDuration = lease
        configuration.outputFolder = URL(fileURLWithPath: "/srv/out", isDirectory: true)
        return try await FleetQueue(configuration: configuration)
    }

    @Test("claims go by priority, then first in; a second enqueue of the same destination adds nothing")
    func order() async throws {
        let database = try await TestPostgres.database()
        let queue = try await queue(database, worker: "a")
        let all = requests(10) { $0 % 3 == 0 ? 5 : 0 }  // 0, 3, 6, 9 first
        #expect(try await queue.enqueue(all) == 10)
        #expect(try await queue.enqueue(Array(all.prefix(4))) == 0)
        let first = try await queue.claim(upTo: 6)
        #expect(first.map(\.id) == [0, 3, 6, 9, 1, 2].map { all[$0].id })
        #expect(first.allSatisfy { $0.version == 1 && $0.attempts == 1 })
        #expect(first[0].url == all[0].url && first[0].destination == all[0].destination)
        #expect(try await queue.claim(upTo: 10).map(\.id) == [4, 5, 7, 8].map { all[$0].id })
        #expect(try await queue.claim(upTo: 10).isEmpty)
        #expect(try await queue.counts() == [.running: 10])
    }

    @Test("three workers claiming at once take every row exactly once")
    func disjointClaims() async throws {
        let database = try await TestPostgres.database()
        let all = requests(600)
        let workers = try await [
            queue(database, worker: "w1"), queue(database, worker: "w2"), queue(database, worker: "w3"),
        ]
        try await workers[0].enqueue(all)
        let claimed = try await withThrowingTaskGroup(of: (Int, [FleetLease]).self) { group in
            for (index, worker) in workers.enumerated() {
                group.addTask {
                    var mine: [FleetLease] = []
                    while true {
                        let batch = try await worker.claim(upTo: 25)
                        if batch.isEmpty { return (index, mine) }
                        mine += batch
                    }
                }
            }
            return try await group.reduce(into: [[FleetLease]](repeating: [], count: workers.count)) { $0[$1.0] = $1.1 }
        }
        let ids = claimed.flatMap { $0.map(\.id) }
        #expect(ids.count == 600)
        #expect(Set(ids) == Set(all.map(\.id)))
        // Each worker's completions count only for its own rows.
        for (index, worker) in workers.enumerated() {
            for lease in claimed[index] { #expect(try await worker.complete(lease, bytes: 65_536)) }
        }
        #expect(try await workers[0].counts() == [.completed: 600])
    }

    @Test("an expired lease is taken over; the old holder's renewal, completion and release change nothing")
    func takeoverAndFencing() async throws {
        let database = try await TestPostgres.database()
        let (a, b) = try await (
            queue(database, worker: "a", lease: .seconds(1)), queue(database, worker: "b", lease: .seconds(1))
        )
        // The leases below are granted while the server runs (not carried over a restart).
        try await TestPostgres.waitUntilServerHasRun(database, seconds: 2)
        try await a.enqueue(requests(8))
        let held = try await a.claim(upTo: 5)
        #expect(held.count == 5)
        #expect(try await a.renew(held).renewed == held)
        // Time passes for a's leases (a hung or partitioned worker): expired now, without a wait.
        try PostgresConnection(database).query(
            "UPDATE haul_downloads SET lease_expires = now() - interval '1 second' WHERE owner = 'a'"
        )
        let taken = try await b.claim(upTo: 10)
        #expect(taken.count == 8)
        let takenOver = taken.filter { lease in held.contains { $0.id == lease.id } }
        #expect(takenOver.count == 5)
        #expect(takenOver.allSatisfy { $0.version == 2 && $0.attempts == 2 })
        // Taken over: the order is the old one (the rows kept their places).
        #expect(Array(taken.prefix(5)).map(\.id) == held.map(\.id))
        let renewal = try await a.renew(held)
        #expect(renewal.renewed.isEmpty && renewal.lost == held)
        #expect(try await a.complete(held[0], bytes: 1) == false)
        #expect(try await a.fail(held[1], reason: "late") == false)
        #expect(try await a.release(held) == 0)
        #expect(try await b.complete(takenOver[0], bytes: 42))
        let entry = try #require(try await b.entry(takenOver[0].id))
        #expect(entry.state == .completed && entry.bytes == 42 && entry.owner == nil && entry.attempts == 2)
        let other = try #require(try await a.entry(takenOver[1].id))
        #expect(other.state == .running && other.owner == "b" && other.leaseVersion == 2)
    }

    @Test("released rows go back in their places for the next worker")
    func release() async throws {
        let database = try await TestPostgres.database()
        let (a, b) = try await (queue(database, worker: "a"), queue(database, worker: "b"))
        try await a.enqueue(requests(6))
        let held = try await a.claim(upTo: 3)
        #expect(try await a.release(held) == 3)
        let next = try await b.claim(upTo: 3)
        #expect(next.map(\.id) == held.map(\.id))
        #expect(next.allSatisfy { $0.version == 2 })
        #expect(try await b.fail(next[0], reason: "HTTP 404 from http://127.0.0.1:8080/f0.bin"))
        let failed = try #require(try await b.entry(next[0].id))
        #expect(failed.state == .failed && failed.lastError == "HTTP 404 from http://127.0.0.1:8080/f0.bin")
    }

    @Test("the per-host limit holds across four workers claiming at once, and is used in full")
    func fleetWideHostLimit() async throws {
        let database = try await TestPostgres.database()
        let limit = 3
        var workers: [FleetQueue] = []
        for index in 0..<4 { workers.append(try await queue(database, worker: "w\(index)", perHost: limit)) }
        let all = requests(40, host: "a.example:80") + requests(40, host: "b.example:80")
        try await workers[0].enqueue(all)
        let monitor = try PostgresConnection(database)
        var completed = 0
        while completed < all.count {
            let claims = try await withThrowingTaskGroup(of: (Int, [FleetLease]).self) { group in
                for (index, worker) in workers.enumerated() {
                    group.addTask { (index, try await worker.claim(upTo: 4)) }
                }
                return try await group.reduce(into: [(Int, [FleetLease])]()) { $0.append($1) }
            }
            let running = try monitor.query(
                "SELECT host, count(*) FROM haul_downloads WHERE state = 'running' GROUP BY host ORDER BY host"
            )
            // Never above the limit, and while rows wait for a host, all of its places are taken.
            #expect(running.allSatisfy { Int($0[1] ?? "") ?? 0 <= limit }, "\(running)")
            let remaining = all.count - completed
            #expect(running.reduce(0) { $0 + (Int($1[1] ?? "") ?? 0) } == min(2 * limit, remaining))
            // Each worker completes one of its rows per round.
            for (index, leases) in claims {
                for lease in leases.prefix(1) where try await workers[index].complete(lease, bytes: 1) {
                    completed += 1
                }
                try await workers[index].release(Array(leases.dropFirst()))
            }
        }
        #expect(try await workers[0].counts() == [.completed: 80])
    }

    @Test("a completion is announced to a process listening on haul_downloads")
    func notification() async throws {
        let database = try await TestPostgres.database()
        let queue = try await queue(database, worker: "a")
        let listener = try PostgresConnection(database)
        try listener.query("LISTEN haul_downloads")
        try await queue.enqueue(requests(1))
        let lease = try #require(try await queue.claim(upTo: 1).first)
        #expect(try await queue.complete(lease, bytes: 7))
        // Waits on the listener's socket (no polling): the notification arrives at the commit.
        var received: [(channel: String, payload: String)] = []
        for _ in 0..<10 where received.isEmpty {
            received += try await TestPostgres.waitForNotification(on: listener, upTo: 1000)
        }
        #expect(received.map(\.channel) == ["haul_downloads"])
        #expect(received.map(\.payload) == ["\(lease.id.rawValue) completed"])
    }

    @Test("the password reaches no error, no row; secrets and unsupported options are refused, not dropped")
    func secrets() async throws {
        let database = try await TestPostgres.database()
        let queue = try await queue(database, worker: "a")
        #expect(!queue.target.contains(TestPostgres.password))
        #expect(queue.target.hasPrefix("postgres://haul@127.0.0.1:"))
        // A wrong password: a connection error that names the database, not either password.
        let wrong = TestPostgres.url(port: try await TestPostgres.port(), database: "postgres", password: "wrong-pw-x1")
        let refused = await #expect(throws: FleetError.self) {
            try await FleetQueue(configuration: .init(connectionString: wrong, worker: "a"))
        }
        #expect(refused?.code == .connection)
        let text = "\(refused.map { "\($0)" } ?? "")"
        #expect(text.contains("postgres://haul@127.0.0.1") && text.contains("password authentication failed"))
        #expect(!text.contains("wrong-pw-x1") && !text.contains(TestPostgres.password))
        // A string libpq cannot read: libpq's own message would quote it; ours does not.
        let malformed = await #expect(throws: FleetError.self) {
            try await FleetQueue(
                configuration: .init(connectionString: "host=127.0.0.1 leaked-pw-3", worker: "a")
            )
        }
        #expect(malformed?.code == .invalidArgument)
        #expect(!"\(malformed.map { "\($0)" } ?? "")".contains("leaked-pw-3"))
        // Credentials in a URL, or headers: refused with the URL redacted.
        let withPassword = DownloadRequest(
            url: URL(string: "http://user:url-pw-9@127.0.0.1/f.bin")!,
            destination: URL(fileURLWithPath: "/srv/out/f.bin")
        )
        let secret = await #expect(throws: FleetError.self) { try await queue.enqueue([withPassword]) }
        #expect(secret?.code == .invalidArgument)
        #expect(!"\(secret.map { "\($0)" } ?? "")".contains("url-pw-9"))
        var headed = requests(1)[0]
        headed.headers = [DownloadHeader("Authorization", "Bearer header-secret-7")]
        await #expect(throws: FleetError.self) { try await queue.enqueue([headed]) }
        var checked = requests(1)[0]
        checked.expectedSize = 10
        let unsupported = await #expect(throws: FleetError.self) { try await queue.enqueue([checked]) }
        #expect("\(unsupported.map { "\($0)" } ?? "")".contains("an expected size"))
        #expect(try await queue.counts().isEmpty)
        // Nothing of them is in the table.
        try await queue.enqueue(requests(3))
        let dump = try PostgresConnection(database).query("SELECT * FROM haul_downloads").flatMap { $0 }
        #expect(!dump.contains { ($0 ?? "").contains("pw") || ($0 ?? "").contains("secret") })
    }
}
