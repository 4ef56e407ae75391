import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Destinations: a folder in the way, two URLs for one file, a completed file asked for again.
extension DownloadManagerTests {
    @Test("a destination that is a directory is refused before anything is sent")
    func destinationIsADirectory() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withDownloadManager(configuration: configuration()) { manager in
            #expect { try manager.download(from: "http://127.0.0.1:1/x", to: directory) } throws: { error in
                guard let error = error as? DownloadError else { return false }
                return error.code == .fileSystem && error.errno == EISDIR && error.path == directory.path
            }
        }
    }

    @Test(
        "a second URL for a destination being written is the same download: its next request goes to the new URL, and a different file starts over, never spliced"
    )
    func secondURLForOneDestination() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("a.bin", size: 3_000_000, seed: 41)
        let b = try server.makeFile("b.bin", size: 3_000_000, seed: 42)
        // One size and one mtime: nginx's ETags (mtime and size) are equal, as for two files written
        // in the same second.
        for name in ["a.bin", "b.bin"] {
            var times = [timeval(tv_sec: 1_700_000_000, tv_usec: 0), timeval(tv_sec: 1_700_000_000, tv_usec: 0)]
            #expect(utimes(server.root.appendingPathComponent(name).path, &times) == 0)
        }
        let destination = directory.appendingPathComponent("x.bin")
        try await withDownloadManager(configuration: configuration()) { manager in
            // /gated/: 1 MiB at once, then 1 KB/s: still writing however loaded the machine is.
            let first = try manager.download(from: server.url("gated/a.bin"), to: destination)
            var events = first.events.makeAsyncIterator()
            await events.next { if case .progress = $0 { true } else { false } }
            let second = try manager.download(from: server.url("b.bin"), to: destination)
            #expect(second === first && second.id == DownloadID(destination: destination))
            #expect(first.url == server.url("b.bin"))
            await first.pause()
            await events.next { if case .paused = $0 { true } else { false } }
            await first.resume()
            // a.bin and b.bin have the same ETag, so If-Range alone would splice b's bytes onto a's. Across
            // URLs the overlap is checked too: it differs, and the download starts over with b.bin.
            var restarts: [RestartReason] = []
            while let event = await events.next() {
                if case .restarted(let reason) = event { restarts.append(reason) }
            }
            #expect(restarts == [.overlapMismatch])
            #expect(try await first.finished() == destination)
        }
        #expect(try Data(contentsOf: destination) == b)
        let requests = server.accessLog().filter { $0.uri == "/b.bin" }
        #expect(requests.map(\.status) == [206, 200], "\(requests)")
        #expect(requests.first?.range.hasPrefix("bytes=") == true && requests.first?.ifRange != "-")
        #expect(requests.last?.range == "-")
    }

    @Test("revalidation: a 304 keeps the complete file, a changed file replaces it whole")
    func revalidateCompletedFile() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let first = try server.makeFile("rv.bin", size: 300_000, seed: 1)
        let destination = directory.appendingPathComponent("rv.bin")
        var configuration = configuration()
        configuration.revalidatesCompletedFiles = true
        for _ in 0..<2 {
            try await withDownloadManager(configuration: configuration) { manager in
                let download = try manager.download(from: server.url("rv.bin"), to: destination)
                #expect(try await download.finished() == destination)
            }
        }
        #expect(try Data(contentsOf: destination) == first)
        var requests = server.accessLog().filter { $0.uri == "/rv.bin" }
        #expect(requests.map(\.status) == [200, 304])

        let second = try server.makeFile("rv.bin", size: 200_000, seed: 2)
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(300)],
            ofItemAtPath: server.root.appendingPathComponent("rv.bin").path
        )
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(from: server.url("rv.bin"), to: destination)
            #expect(try await download.finished() == destination)
        }
        #expect(try Data(contentsOf: destination) == second)
        requests = server.accessLog().filter { $0.uri == "/rv.bin" }
        #expect(requests.map(\.status) == [200, 304, 200])
        let state = try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent(".haul").path)
        #expect(!state.contains { $0.hasSuffix(".part") })
    }
}
