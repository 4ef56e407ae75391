import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Preallocation (issue 19, item 4): a file of known length reserves its blocks when its answer is
/// accepted, so a disk too small fails at the start, not at 90 %. The small disk is a tmpfs of a few
/// MiB that the test mounts (as root, which the test command runs as).
@Suite("Preallocation", .timeLimit(.minutes(2)))
struct PreallocationTests {
    func configuration(preallocates: Bool) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration()
        configuration.bufferSize = 64 * 1024
        configuration.retryLimit = 0
        configuration.preallocatesFiles = preallocates
        return configuration
    }

    @Test(
        "a file larger than the free space fails at once with ENOSPC, leaving nothing; without preallocation, only once the disk is full"
    )
    func tooLarge() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        try server.makeFile("big.bin", size: 8 * 1024 * 1024)
        for preallocates in [true, false] {
            try await withSmallDisk(megabytes: 3) { disk in
                let destination = disk.appendingPathComponent("big.bin")
                try await withDownloadManager(configuration: configuration(preallocates: preallocates)) { manager in
                    let download = try manager.download(from: server.url("big.bin"), to: destination)
                    do {
                        _ = try await download.finished()
                        Issue.record("a file larger than the disk must fail")
                    } catch let error as DownloadError {
                        #expect(error.code == .fileSystem && error.errno == ENOSPC, "\(error)")
                        if preallocates { #expect(error.description.contains("needs \(8 * 1024 * 1024) bytes")) }
                    }
                    if preallocates {
                        #expect(download.bytesReceivedInThisProcess == 0)  // refused before the first byte
                    } else {
                        #expect(download.bytesReceivedInThisProcess > 1024 * 1024)  // wrote until the disk was full
                    }
                }
                #expect(!FileManager.default.fileExists(atPath: destination.path))
                let state = try FileManager.default.contentsOfDirectory(
                    atPath: disk.appendingPathComponent(".haul").path
                )
                #expect(
                    !state.contains { $0.hasSuffix(".part") } || !preallocates,
                    "a preallocated download that failed at the start leaves no partial: \(state)"
                )
            }
        }
    }

    @Test("a download reserves the blocks of the whole file at the start; its length stays the bytes written")
    func reserved() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 3 * 1024 * 1024
        let source = try server.makeFile("r.bin", size: size)
        try await withSmallDisk(megabytes: 16) { disk in
            let destination = disk.appendingPathComponent("r.bin")
            var configuration = configuration(preallocates: true)
            configuration.progressInterval = .milliseconds(20)
            try await withDownloadManager(configuration: configuration) { manager in
                let download = try manager.download(from: server.url("gated/r.bin"), to: destination)
                var events = download.events.makeAsyncIterator()
                await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 256 * 1024 } else { false } }
                await download.pause()
                let paused = await events.next { if case .paused = $0 { true } else { false } }
                guard case .paused(let progress)? = paused else {
                    Issue.record("no paused event")
                    return
                }
                var status = stat()
                let partial = try #require(download.stateDirectory).appendingPathComponent("\(download.id).part")
                #expect(stat(partial.path, &status) == 0)
                #expect(Int64(status.st_size) == progress.bytesReceived)
                #expect(Int64(status.st_blocks) * 512 >= Int64(size))
                await download.resume()
                _ = try await download.finished()
            }
            #expect(try Data(contentsOf: destination) == source)
        }
    }
}
