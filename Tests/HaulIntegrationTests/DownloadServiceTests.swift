import Foundation
import HaulService
import Logging
import ServiceLifecycle
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// The manager as a `Service` in a `ServiceGroup`: nothing before `run()`, downloads kept across a
/// graceful shutdown.
@Suite("DownloadService in a ServiceGroup", .timeLimit(.minutes(1)))
struct DownloadServiceTests {
    @Test(
        "nothing starts before run; a graceful shutdown pauses every download, bytes kept; the next service finishes it"
    )
    func gracefulShutdownKeepsBytes() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 3 * 1024 * 1024
        let source = try server.makeFile("service.bin", size: size)
        let destination = directory.appendingPathComponent("service.bin")
        let url = server.url("gated/service.bin")  // 1 MiB at once, then 1 KB/s; a range at full speed
        var configuration = DownloadManager.Configuration.forTests()
        let state = directory.appendingPathComponent("state")
        configuration.stateDirectory = state
        let logger = Logger(label: "haul-test")

        let service = DownloadService(configuration: configuration)
        // Made, not run: no journal, no loop.
        #expect(!FileManager.default.fileExists(atPath: state.path))
        let group = ServiceGroup(services: [service], logger: logger)
        let running = Task { try await group.run() }
        let manager = try await service.manager()
        let download = try manager.download(from: url, to: destination)
        var events = download.events.makeAsyncIterator()
        await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 512 * 1024 } else { false } }
        await group.triggerGracefulShutdown()
        try await running.value
        guard case .paused(let progress)? = await events.next(where: { if case .paused = $0 { true } else { false } })
        else {
            Issue.record("the shutdown paused nothing")
            return
        }
        let partial = state.appendingPathComponent("\(download.id).part")
        #expect(try Data(contentsOf: partial) == source.prefix(Int(progress.bytesReceived)))
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        await #expect {
            try await service.manager()
        } throws: { error in
            (error as? DownloadError)?.code == .shutdown
        }

        // The next process's service continues from the bytes kept.
        let next = DownloadService(configuration: configuration)
        let nextGroup = ServiceGroup(services: [next], logger: logger)
        let nextRunning = Task { try await nextGroup.run() }
        let file = try await next.manager().fetch(url, to: destination)
        #expect(file == destination)
        #expect(try Data(contentsOf: destination) == source)
        await nextGroup.triggerGracefulShutdown()
        try await nextRunning.value
        let requests = await server.requests(to: "/gated/service.bin", atLeast: 2)
        #expect(requests.count == 2)
        #expect(requests.contains { $0.range == "bytes=\(progress.bytesReceived)-" && $0.status == 206 })
    }

    @Test("a task waiting for a service's manager leaves when cancelled")
    func waitingForTheManagerIsCancellable() async {
        let service = DownloadService()
        let waiter = Task { try await service.manager() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
    }
}
