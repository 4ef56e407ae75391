import Foundation
import Testing

@testable import HaulPostgres

/// A throwaway PostgreSQL cluster of the tests' own (`scripts/postgres-cluster.sh`), started once per
/// test process on a free loopback port and stopped when the process ends; each test gets a fresh
/// database in it.
enum TestPostgres {
    /// The password of the cluster's `haul` user: tests check that it never reaches an error or a row.
    static let password = "pw-\(UInt64.random(in: 1...UInt64.max))-secret"

    private static let cluster = Task { () throws -> Cluster in try await Cluster.start() }

    /// A cluster of the tests' own: its folder and port.
    struct Cluster {
        let directory: String
        let port: Int

        /// Starts one, stopped (and its folder removed) when this process ends.
        static func start() async throws -> Cluster {
            // A port free when looked at may be taken before the server binds it (by another test's
            // server): a start that fails is tried again on another port.
            var failure: (any Error)?
            for _ in 0..<3 {
                let port = try NginxServer.freePort()
                let directory = "/tmp/haul-postgres-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
                do {
                    try await script(["start", directory, String(port), password, String(getpid())])
                    return Cluster(directory: directory, port: port)
                } catch {
                    failure = error
                    try? await script(["stop", directory])
                }
            }
            throw failure ?? TestFailure("the test cluster did not start")
        }

        /// Stops the server, keeping its data (a database that went away).
        func down() async throws { try await Self.script(["down", directory]) }

        /// Starts it again as before.
        func up() async throws { try await Self.script(["up", directory]) }

        /// A connection string to a new, empty database in it.
        func database() async throws -> String {
            let name = "t\(UInt64.random(in: 1...UInt64.max))"
            let admin = try PostgresConnection(url(port: port, database: "postgres"))
            try admin.query("CREATE DATABASE \(name)")  // a name of digits and a letter: no quoting needed
            return url(port: port, database: name)
        }

        private static func script(_ arguments: [String]) async throws {
            let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
                .appendingPathComponent("scripts/postgres-cluster.sh").path
            let errors = "\(NSTemporaryDirectory())haul-postgres-\(getpid())-\(UUID().uuidString).log"
            defer { unlink(errors) }
            let process = try ChildProcess("/bin/bash", [path] + arguments, stderr: errors)
            guard await process.exited() == 0 else {
                let message = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
                throw TestFailure("postgres-cluster.sh \(arguments[0]) failed: \(message)")
            }
        }
    }

    /// Returns once the server of `database` has run for more than `seconds` (looked at every 100 ms):
    /// a lease granted from then on that a test makes expire (by moving its `lease_expires` back) is
    /// one granted while the server ran, which a claim takes over at once (``FleetSchema``'s rule
    /// gives leases from before a restart a lease's time to be renewed first).
    static func waitUntilServerHasRun(_ database: String, seconds: Int) async throws {
        let connection = try PostgresConnection(database)
        let query = "SELECT now() > pg_postmaster_start_time() + interval '\(seconds) seconds'"
        while try connection.query(query).first?.first == "f" {
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// A connection string to a new, empty database in the shared test cluster.
    static func database() async throws -> String { try await cluster.value.database() }

    static func url(port: Int, database: String, password: String = password) -> String {
        "postgres://haul:\(password)@127.0.0.1:\(port)/\(database)?connect_timeout=10"
    }

    static func port() async throws -> Int { try await cluster.value.port }

    /// Waits until `connection` (which `LISTEN`s) has a notification or `milliseconds` pass, on a
    /// thread of its own (Swift concurrency's shared threads are two here; one blocked in `poll`
    /// would hold up the downloads the test waits for). Returns what arrived.
    @discardableResult
    static func waitForNotification(on connection: PostgresConnection, upTo milliseconds: Int32) async throws
        -> [(channel: String, payload: String)]
    {
        let socket = connection.socket
        await withCheckedContinuation { continuation in
            Thread {
                var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
                _ = poll(&descriptor, 1, milliseconds)
                continuation.resume()
            }.start()
        }
        return try connection.notifications()
    }
}
