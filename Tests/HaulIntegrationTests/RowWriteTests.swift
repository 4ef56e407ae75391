import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport

/// Issue 76, item 3: the loop writes the rows callers ask for, in a transaction of their own, and
/// answers each call once its rows are durable. A write the disk refuses is answered with why, and
/// nothing of it is kept: no row, no handle, no file.
@Suite("Rows written by the loop", .timeLimit(.minutes(2)))
struct RowWriteTests {
    /// A request whose row needs pages of its own: many long mirror URLs (a row holds them all).
    func largeRequest(_ server: NginxServer, to destination: URL) -> DownloadRequest {
        var request = DownloadRequest(url: server.url("r.bin?large"), destination: destination)
        request.mirrors = (0..<200).map { index in
            URL(string: server.url("r.bin").absoluteString + "?mirror\(index)=" + String(repeating: "m", count: 1_000))!
        }
        return request
    }

    @Test(
        "a download or a run of enqueued rows the full disk refuses is answered with why, nothing kept; with space again the same requests download whole"
    )
    func fullDiskAnswersTheCaller() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("r.bin", size: 20_000, seed: 11)
        try await withSmallDisk(megabytes: 4) { disk in
            var configuration = DownloadManager.Configuration.forTests()
            configuration.stateDirectory = disk.appendingPathComponent("state")
            try await withDownloadManager(configuration: configuration) { manager in
                // The journal exists and works.
                let first = directory.appendingPathComponent("first.bin")
                #expect(try await manager.download(from: server.url("r.bin"), to: first).finished() == first)

                try fill(disk, leaving: 0)
                let large = directory.appendingPathComponent("large.bin")
                let request = largeRequest(server, to: large)
                do {
                    _ = try manager.download(request)
                    Issue.record("the row of a large request was written on a full disk")
                } catch let error as DownloadError {
                    #expect(error.errno == ENOSPC, "\(error)")
                    #expect(error.url == request.url.absoluteString, "\(error)")
                }
                let long = String(repeating: "r", count: 1_000)
                let runs = (0..<100).map { index in
                    DownloadRequest(
                        url: URL(string: server.url("r.bin").absoluteString + "?run\(index)=" + long)!,
                        destination: directory.appendingPathComponent("run-\(index).bin")
                    )
                }
                do {
                    let summary = try manager.enqueue(runs)
                    Issue.record("a run of 100 large rows was written on a full disk: \(summary)")
                } catch let error as DownloadError {
                    #expect(error.errno == ENOSPC, "\(error)")
                }
                // Nothing of either is kept: no row to list, no handle, no file.
                #expect(manager.downloads.isEmpty)
                #expect(manager.download(id: request.id) == nil)
                #expect(!FileManager.default.fileExists(atPath: large.path))

                // Space again: the same requests are written, and download whole.
                try FileManager.default.removeItem(at: disk.appendingPathComponent("filler"))
                #expect(try await manager.download(request).finished() == large)
                #expect(try Data(contentsOf: large) == source)
                #expect(try manager.enqueue(runs).queued == runs.count)
                await manager.waitUntilIdle()
                for index in 0..<runs.count {
                    let file = directory.appendingPathComponent("run-\(index).bin")
                    #expect(try Data(contentsOf: file) == source, "run-\(index).bin")
                }
            }
        }
    }
}
