import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// ``DownloadRequest/continuesExistingFile`` (issue 43, item 4): a file Haul did not download is
/// continued only where its last bytes are proven the server's, and stays as it was until replaced.
@Suite("A file left by another tool")
struct ContinueTests {
    @Test("its bytes continued after a 64 KiB overlap, with no If-Range: it has no validator")
    func continuedAfterTheOverlap() async throws {
        try await withFaultServer { server, directory in
            let size = 2 * 1024 * 1024
            let body = FaultServer.body(size: size)
            let destination = directory.appendingPathComponent("left.bin")
            let kept = 900_001
            try body.prefix(kept).write(to: destination)
            var request = DownloadRequest(url: server.url("file/\(size)"), destination: destination)
            request.continuesExistingFile = true
            try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
                let download = try manager.download(request)
                #expect(try await download.finished() == destination)
            }
            #expect(try Data(contentsOf: destination) == body)
            let asked = server.requests(to: "/file/\(size)")
            #expect(asked.map(\.range) == ["bytes=\(kept - 64 * 1024)-"], "\(asked)")
            #expect(asked.map(\.ifRange) == [nil] && asked.map(\.status) == [206], "\(asked)")
        }
    }

    @Test("where Haul's journal has the download's own partial file, that goes on, not the file at the destination")
    func onlyAFileHaulDidNotDownload() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("own.bin", size: 1024 * 1024 + 256 * 1024, seed: 435)
        let destination = directory.appendingPathComponent("own.bin")
        // The first run: 1 MiB at once, then 1 KB/s; stopped by its manager's shutdown with the MiB kept.
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            let download = try manager.download(from: server.url("gated/own.bin"), to: destination)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 1_048_576 } else { false } }
        }
        // Someone's file at the destination meanwhile, of another length than the partial.
        try Data(repeating: 0x55, count: 70_000).write(to: destination)
        var request = DownloadRequest(url: server.url("gated/own.bin"), destination: destination)
        request.continuesExistingFile = true
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            let download = try manager.download(request)
            #expect(try await download.finished() == destination)
        }
        let asked = await server.requests(to: "/gated/own.bin", atLeast: 2)
        #expect(try Data(contentsOf: destination) == source, "\(asked) \(FilePath.fileLength(destination.path) ?? -1)")
        let resumed = try #require(asked.last)
        // From the partial's end, pinned by its validator: not from the file's 70,000 bytes.
        let start = Int64(resumed.range.dropFirst("bytes=".count).dropLast()) ?? -1
        #expect(start >= 1_048_576 && resumed.ifRange != "-" && resumed.status == 206, "\(asked)")
    }
}
