import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// `fetch`: one awaitable call, whose task's cancellation pauses the download; and what cancelling a
/// task that waits on `finished()` does.
@Suite("fetch and task cancellation", .timeLimit(.minutes(2)))
struct FetchTests {
    func configuration() -> DownloadManager.Configuration { .forTests() }

    /// Reads the manager's feed until an event of `id` satisfies `predicate`.
    func next(
        _ events: inout DownloadManagerEvents.AsyncIterator,
        of id: DownloadID,
        where predicate: (DownloadEvent) -> Bool
    ) async -> DownloadEvent? {
        while let event = await events.next() {
            if event.id == id, predicate(event.event) { return event.event }
        }
        return nil
    }

    @Test("cancelling the task that awaits fetch pauses the download, its bytes kept; fetch again resumes from them")
    func cancellationPauses() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 3 * 1024 * 1024
        let source = try server.makeFile("fetch.bin", size: size)
        let destination = directory.appendingPathComponent("fetch.bin")
        let url = server.url("gated/fetch.bin")  // 1 MiB at once, then 1 KB/s
        let id = DownloadID(destination: destination)
        try await withDownloadManager(configuration: configuration()) { manager in
            var events = manager.events.makeAsyncIterator()
            let task = Task { try await manager.fetch(url, to: destination) }
            _ = await next(&events, of: id) {
                if case .progress(let progress) = $0 { progress.bytesReceived >= 512 * 1024 } else { false }
            }
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            let paused = await next(&events, of: id) { if case .paused = $0 { true } else { false } }
            guard case .paused(let progress)? = paused else {
                Issue.record("no pause after the cancellation")
                return
            }
            #expect(progress.bytesReceived >= 512 * 1024 && progress.bytesReceived < Int64(size))
            #expect(!FileManager.default.fileExists(atPath: destination.path))
            let handle = try #require(manager.download(id: id))
            #expect(handle.state == .paused)
            let partial = try #require(handle.stateDirectory).appendingPathComponent("\(id).part")
            #expect(try Data(contentsOf: partial) == source.prefix(Int(progress.bytesReceived)))
            // A later fetch continues from the bytes kept.
            #expect(try await manager.fetch(url, to: destination) == destination)
            #expect(try Data(contentsOf: destination) == source)
            let requests = await server.requests(to: "/gated/fetch.bin", atLeast: 2)
            #expect(requests.count == 2)
            let resumed = requests.first { $0.range != "-" }
            #expect(resumed?.range == "bytes=\(progress.bytesReceived)-")
            #expect(resumed?.status == 206)
        }
    }

    @Test("a fetch from a task already cancelled throws at once and asks for nothing")
    func cancelledBeforeTheCall() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        try server.makeFile("never.bin", size: 1000)
        let destination = directory.appendingPathComponent("never.bin")
        try await withDownloadManager(configuration: configuration()) { manager in
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await manager.fetch(server.url("never.bin"), to: destination)
            }
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(manager.download(id: DownloadID(destination: destination)) == nil)
            #expect(manager.journalEntry(id: DownloadID(destination: destination)) == nil)
        }
        #expect(server.accessLog().filter { $0.uri.hasSuffix("never.bin") }.isEmpty)
    }

    @Test("cancelling a task that waits on finished() ends that wait only: the download goes on")
    func finishedWaiterCancellation() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("goes-on.bin", size: 3 * 1024 * 1024)
        let destination = directory.appendingPathComponent("goes-on.bin")
        try await withDownloadManager(configuration: configuration()) { manager in
            // 1 MiB at once, then 1 KB/s: it cannot end before the test has looked.
            let download = try manager.download(from: server.url("gated/goes-on.bin"), to: destination)
            let waiter = Task { try await download.finished() }
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let progress) = $0 { progress.bytesReceived > 0 } else { false } }
            waiter.cancel()
            await #expect(throws: CancellationError.self) { try await waiter.value }
            // The download itself goes on: bytes past the first mebibyte arrive after the wait ended.
            let later = await events.next {
                if case .progress(let progress) = $0 { progress.bytesReceived > 1024 * 1024 + 2 * 1024 } else { false }
            }
            #expect(later != nil)
            #expect(download.state == .receiving)
            // Bytes on disk so far are the file's.
            let partial = try #require(download.stateDirectory).appendingPathComponent("\(download.id).part")
            let written = try Data(contentsOf: partial)
            #expect(written.count > 1024 * 1024 && written == source.prefix(written.count))
            await download.cancel()
        }
    }
}
