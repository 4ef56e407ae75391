import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport

/// The test support's shared servers (issue 75, item 2): one nginx and one fault server for the test
/// process, a view of each per test. Views must not see each other's files, log lines, request
/// counts or gates, and a view's stop must leave the others serving.
@Suite("Shared test servers", .timeLimit(.minutes(2)))
struct SharedServerTests {
    func fetch(_ url: URL, to file: URL, state: URL) async throws -> Data {
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        try await withDownloadManager(configuration: configuration) { manager in
            _ = try await manager.download(from: url, to: file).finished()
        }
        return try Data(contentsOf: file)
    }

    @Test(
        "two views of the shared nginx: one port, each its own file of one name and its own log; one stops, the other serves"
    )
    func nginxViews() async throws {
        let (first, directory) = try await startServerAndDirectory()
        let (second, other) = try await startServerAndDirectory()
        defer {
            stop(second, other)
            stop(first, directory)
        }
        #expect(first.port == second.port && first.namespace != second.namespace && first.namespace != nil)
        let one = try first.makeFile("same.bin", size: 100_000, seed: 1)
        let two = try second.makeFile("same.bin", size: 100_000, seed: 2)
        let state = directory.appendingPathComponent("state")
        #expect(
            try await fetch(first.url("slow/same.bin"), to: directory.appendingPathComponent("1"), state: state) == one
        )
        #expect(try await fetch(second.url("same.bin"), to: directory.appendingPathComponent("2"), state: state) == two)
        #expect(first.accessLog().map(\.uri) == ["/slow/same.bin"])
        #expect(second.accessLog().map(\.uri) == ["/same.bin"])
        first.stop()
        #expect(NginxServer.statusLine(port: first.port, path: first.url("same.bin").path)?.contains(" 404 ") == true)
        #expect(try await fetch(second.url("same.bin"), to: directory.appendingPathComponent("3"), state: state) == two)
    }

    @Test("two views of the shared fault server: each its own first request, its own requests, its own gate")
    func faultServerViews() async throws {
        let (first, directory) = try startFaultServerAndDirectory()
        let (second, other) = try startFaultServerAndDirectory()
        defer {
            stop(second, other)
            stop(first, directory)
        }
        #expect(first.port == second.port && first.namespace != second.namespace)
        // /expire/: the first request to the path is cut, every later one gets 403; each view's
        // first is its own, so each fails the same way.
        let state = directory.appendingPathComponent("state")
        for server in [first, second] {
            await #expect(throws: DownloadError.self) {
                _ = try await fetch(
                    server.url("expire/1000/50000"),
                    to: directory.appendingPathComponent(UUID().uuidString),
                    state: state
                )
            }
            #expect(server.requests(to: "/expire/1000/50000").first?.status == 200)
        }
        #expect(first.allRequests.allSatisfy { $0.namespace == first.namespace })
        #expect(second.allRequests.allSatisfy { $0.namespace == second.namespace })
        // A gate opened by one view lets its answers go, not the other's.
        first.openGate()
        let released = try await fetch(
            first.url("gate/1000/50000"),
            to: directory.appendingPathComponent("gated"),
            state: state
        )
        #expect(released == FaultServer.body(size: 50000))
        // The other view's gate is still shut: its answer stops at 1,000 bytes until it opens.
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = other.appendingPathComponent("state")
        configuration.progressInterval = .milliseconds(20)
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(
                from: second.url("gate/1000/50000"),
                to: other.appendingPathComponent("held")
            )
            var events = download.events.makeAsyncIterator()
            let seen = await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
            guard case .progress(let progress)? = seen else {
                Issue.record("no progress: \(String(describing: seen))")
                return
            }
            #expect(progress.bytesReceived == 1000)
            second.openGate()
            _ = try await download.finished()
        }
        #expect(try Data(contentsOf: other.appendingPathComponent("held")) == FaultServer.body(size: 50000))
    }
}
