import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport

/// Issue 61: a kept-alive connection's socket stays watched between its requests (its watch parked,
/// no `epoll_ctl` twice per download), and a parked watch never outlives its socket: it is disarmed
/// when the socket is ready while parked (the server closed it) and before curl closes it, so that
/// a new socket under the same descriptor number is always watched anew.
@Suite("Parked socket watches", .timeLimit(.minutes(2)))
struct SocketWatchTests {
    /// `count` bodies of `path(index)` from `server`, `width` at once, each compared with `expected`.
    private func fetch(
        _ manager: DownloadManager,
        count: Int,
        width: Int,
        url: @escaping @Sendable (Int) -> URL,
        expected: Data
    ) async throws {
        try await withThrowingTaskGroup(of: Data.self) { group in
            var next = 0
            func add() {
                let index = next
                next += 1
                group.addTask { try await manager.data(from: url(index), maximumSize: 1 << 20).data }
            }
            for _ in 0..<min(width, count) { add() }
            var received = 0
            while let body = try await group.next() {
                #expect(body == expected)
                received += 1
                if next < count { add() }
            }
            #expect(received == count)
        }
    }

    /// ``fetch(_:count:width:url:expected:)`` of the fault server's bodies of `size` bytes.
    private func fetch(
        _ manager: DownloadManager,
        count: Int,
        width: Int,
        url: @escaping @Sendable (Int) -> URL,
        size: Int
    ) async throws {
        try await fetch(manager, count: count, width: width, url: url, expected: FaultServer.body(size: size))
    }

    /// `body` with a manager of `slots` at once and a fault server of its own.
    private func withFaultServer(
        slots: Int,
        _ body: (FaultServer, DownloadManager) async throws -> Void
    ) async throws {
        let (server, directory) = try startFaultServerAndDirectory()
        defer { stop(server, directory) }
        var configuration = DownloadManager.Configuration.forTests()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.maxConcurrentDownloads = slots
        try await withDownloadManager(configuration: configuration) { manager in try await body(server, manager) }
    }

    @Test("nginx keeps its connections: the next request on one gets its parked watch back")
    func keptAliveConnections() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let body = try server.makeFile("small.bin", size: 65536, seed: 7)
        var configuration = DownloadManager.Configuration.forTests()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.maxConcurrentDownloads = 8
        try await withDownloadManager(configuration: configuration) { manager in
            try await fetch(manager, count: 200, width: 8, url: { _ in server.url("small.bin") }, expected: body)
            // curl lets go of a connection's socket between some of its requests (how often depends on
            // timing): those requests found the watch parked and took it back as it was.
            let counts = manager.parkedWatchCounts
            #expect(counts.reclaimed >= 1, "\(counts)")
            // Each watch parked was handed back, but for at most one per connection left idle (at most
            // 16: curl's cache of idle connections, `CURLMOPT_MAXCONNECTS`, for 8 at once).
            let resolved = counts.reclaimed + counts.disarmedWhenReady + counts.disarmedWhenClosed
            #expect(counts.parked - resolved <= 16 && resolved <= counts.parked, "\(counts)")
        }
    }

    @Test("every answer closes its connection: each parked watch is disarmed before curl closes its socket")
    func connectionsClosedByCurl() async throws {
        let size = 20_000
        try await withFaultServer(slots: 8) { server, manager in
            // `Connection: close` on every answer: a new socket per request, under the numbers the
            // closed ones had. (A new socket's first watch is for writing, so a stale parked watch
            // would usually be re-armed anyway: the counter below is what shows the close path ran.)
            try await fetch(manager, count: 120, width: 8, url: { server.url("file/\(size)?\($0)") }, size: size)
            let counts = manager.parkedWatchCounts
            #expect(counts.disarmedWhenClosed >= 1, "\(counts)")
            #expect(counts.reclaimed + counts.disarmedWhenReady + counts.disarmedWhenClosed <= counts.parked)
        }
    }

    @Test(
        "the server closes idle connections unannounced: their parked watches are disarmed, the next requests connect anew"
    )
    func connectionsClosedByTheServer() async throws {
        let size = 30_000
        try await withFaultServer(slots: 4) { server, manager in
            // Each answer leaves its connection looking reusable, then the server closes it: curl keeps
            // it, its socket becomes readable (end of file) while its watch is parked, and the next
            // request finds it dead and opens another, often under the same number.
            for round in 0..<5 {
                let path: @Sendable (Int) -> String = { "keepalive-close/\(size)?\(round)-\($0)" }
                try await fetch(manager, count: 4, width: 4, url: { server.url(path($0)) }, size: size)
            }
            let counts = manager.parkedWatchCounts
            #expect(counts.parked >= 1 && counts.disarmedWhenReady >= 1, "\(counts)")
            #expect(server.allRequests.count == 20, "\(server.allRequests.map(\.path))")
        }
    }
}
