import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// Several managers on one state directory: a download one runs is followed by the others, never
/// fetched twice, and taken over with its bytes when the one that ran it stops.
@Suite("One journal, many managers", .timeLimit(.minutes(2)))
struct SharedJournalTests {
    /// A first manager on `directory/.haul`, downloading `name` (a MiB on `server`) into
    /// `directory/name` at 16 KiB/s, past its first `bytes`: a minute for the file, so that it still
    /// runs when a test that waited for a turn on a loaded machine goes on
    /// (``Download/setMaxBytesPerSecond(_:)`` lifts the limit).
    struct Running {
        let configuration: DownloadManager.Configuration
        let manager: DownloadManager
        let download: Download
        let source: Data
        let destination: URL

        init(_ name: String, seed: UInt64, on server: NginxServer, in directory: URL, past bytes: Int64 = 1)
            async throws
        {
            source = try server.makeFile(name, size: 1024 * 1024, seed: seed)
            var configuration = DownloadManager.Configuration()
            configuration.stateDirectory = directory.appendingPathComponent(".haul")
            self.configuration = configuration
            destination = directory.appendingPathComponent(name)
            manager = try DownloadManager(configuration: configuration)
            var request = DownloadRequest(url: server.url(name), destination: destination)
            request.maxBytesPerSecond = 16 * 1024
            download = try manager.download(request)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived >= bytes } else { false } }
        }
    }

    @Test("two managers on one state directory: the second follows the first's download of a file, and runs its own")
    func secondManagerFollows() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let own = try server.makeFile("own.bin", size: 300 * 1024, seed: 12)
        let first = try await Running("shared.bin", seed: 11, on: server, in: directory)
        let (running, destination) = (first.download, first.destination)

        let second = try DownloadManager(configuration: first.configuration)
        let followed = try second.download(from: server.url("shared.bin"), to: destination)
        let other = try second.download(from: server.url("own.bin"), to: directory.appendingPathComponent("own.bin"))
        #expect(try await other.finished() == directory.appendingPathComponent("own.bin"))
        var followedEvents = followed.events.makeAsyncIterator()
        #expect(await followedEvents.next() == .queued)
        // Followed, not fetched: the first's download ends as soon as it may go at full speed.
        running.setMaxBytesPerSecond(nil)
        #expect(try await followed.finished() == destination)
        #expect(!followed.wasAlreadyComplete)
        #expect(try await running.finished() == destination)
        await second.waitUntilIdle()
        await first.manager.shutdown()
        await second.shutdown()
        #expect(try Data(contentsOf: destination) == first.source)
        #expect(try Data(contentsOf: directory.appendingPathComponent("own.bin")) == own)
        // Fetched once, by the first.
        let requests = await server.requests(to: "/shared.bin", atLeast: 1)
        #expect(requests.count == 1 && requests[0].range == "-", "\(requests)")
    }

    @Test("a checksum the follower's caller asked for is checked on the file the other manager placed")
    func followerChecksItsChecksum() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let first = try await Running("checked.bin", seed: 17, on: server, in: directory)
        let destination = first.destination

        let second = try DownloadManager(configuration: first.configuration)
        var request = DownloadRequest(url: server.url("checked.bin"), destination: destination)
        request.checksum = try #require(Checksum("sha256:" + String(repeating: "0", count: 64)))
        let followed = try second.download(request)
        var followedEvents = followed.events.makeAsyncIterator()
        #expect(await followedEvents.next() == .queued)
        first.download.setMaxBytesPerSecond(nil)
        #expect(try await first.download.finished() == destination)
        await #expect(throws: DownloadError.self) { try await followed.finished() }
        if case .failed(let error) = followed.state {
            #expect(error.code == .checksumMismatch)
        } else {
            Issue.record("the follower's download is \(followed.state), not failed")
        }
        await first.manager.shutdown()
        await second.shutdown()
        // The first manager's file stays: the second's check failed on a copy of its own.
        #expect(try Data(contentsOf: destination) == first.source)
    }

    @Test("a manager that stops mid-download: the one following it takes it over from its bytes (Range: bytes=N-)")
    func followerTakesOver() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let first = try await Running("taken.bin", seed: 13, on: server, in: directory, past: 64 * 1024)
        let destination = first.destination

        let second = try DownloadManager(configuration: first.configuration)
        let followed = try second.download(from: server.url("taken.bin"), to: destination)
        var followedEvents = followed.events.makeAsyncIterator()
        #expect(await followedEvents.next() == .queued)
        await first.manager.shutdown()
        #expect(try await followed.finished() == destination)
        await second.shutdown()
        #expect(try Data(contentsOf: destination) == first.source)
        let requests = await server.requests(to: "/taken.bin", atLeast: 2)
        #expect(requests.count == 2, "\(requests)")
        #expect(requests.first?.range == "-")
        let offset = requests.last.flatMap { Int($0.range.dropFirst("bytes=".count).dropLast()) }
        #expect(offset.map { $0 >= 64 * 1024 } == true, "\(requests.map(\.range))")
    }

    @Test(
        "a download another manager runs, found by id: followed; paused here it stops following, resumed it follows again"
    )
    func followedByIDPausedAndResumed() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let first = try await Running("byid.bin", seed: 14, on: server, in: directory)
        let (running, destination) = (first.download, first.destination)

        let second = try DownloadManager(configuration: first.configuration)
        #expect(second.downloads.map(\.id) == [running.id])
        let seen = try #require(second.download(id: running.id))
        var seenEvents = seen.events.makeAsyncIterator()
        #expect(await seenEvents.next() == .queued)
        await seen.pause()
        #expect(await seenEvents.next { if case .paused = $0 { true } else { false } } != nil)
        // Paused here only: the first goes on.
        #expect(running.state != .paused)
        await seen.resume()
        #expect(await seenEvents.next() == .queued)
        running.setMaxBytesPerSecond(nil)
        #expect(try await seen.finished() == destination)
        #expect(try await running.finished() == destination)
        await first.manager.shutdown()
        await second.shutdown()
        #expect(try Data(contentsOf: destination) == first.source)
        #expect(await server.requests(to: "/byid.bin", atLeast: 1).count == 1)
    }
}
