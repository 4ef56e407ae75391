import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Expected checksums and sizes, the maximum size, and local file-system failures.
@Suite("Integrity and disk errors", .timeLimit(.minutes(2)))
struct IntegrityTests {
    func configuration(_ directory: URL) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.retryLimit = 1
        configuration.retryDelay = .milliseconds(10)
        return configuration
    }

    @Test("a matching checksum (SHA-256, SHA-1, MD5) completes; a wrong one fails with both values and places nothing")
    func checksums() async throws {
        try await withFaultServer { server, directory in
            let body = FaultServer.body(size: 300_000)
            try await withDownloadManager(configuration: configuration(directory)) { manager in
                for algorithm in Checksum.Algorithm.allCases {
                    let hex = try await coreutilsDigest(algorithm, of: body, in: directory)
                    let checksum = try #require(Checksum("\(algorithm.rawValue):\(hex.uppercased())"))
                    let destination = directory.appendingPathComponent("good-\(algorithm.rawValue)")
                    let download = try manager.download(
                        DownloadRequest(
                            url: server.url("file/300000"),
                            destination: destination,
                            checksum: checksum,
                            expectedSize: 300_000
                        )
                    )
                    #expect(try await download.finished() == destination)
                    #expect(try Data(contentsOf: destination) == body)
                }
                // A wrong digest: the user's file at the destination stays as it was.
                let destination = directory.appendingPathComponent("bad")
                try Data("the user's file".utf8).write(to: destination)
                let wrong = try #require(Checksum(algorithm: .sha256, hex: String(repeating: "ab", count: 32)))
                let actual = try await coreutilsDigest(.sha256, of: body, in: directory)
                let download = try manager.download(
                    DownloadRequest(url: server.url("file/300000"), destination: destination, checksum: wrong)
                )
                await #expect { try await download.finished() } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .checksumMismatch && error.description.contains(wrong.hex)
                        && error.description.contains(actual) && !error.isTransient
                }
                #expect(try Data(contentsOf: destination) == Data("the user's file".utf8))
                let partial = directory.appendingPathComponent("state/\(download.id).part")
                #expect(!FileManager.default.fileExists(atPath: partial.path))
                #expect(server.requests(to: "/file/300000").count == 4)
            }
        }
    }

    @Test("an expected size the server contradicts, and a maximum size, fail at once and clearly")
    func sizes() async throws {
        try await withFaultServer { server, directory in
            var configuration = configuration(directory)
            configuration.maximumFileSize = 250_000
            try await withDownloadManager(configuration: configuration) { manager in
                let wrongSize = try manager.download(
                    DownloadRequest(
                        url: server.url("file/200000"),
                        destination: directory.appendingPathComponent("a"),
                        expectedSize: 1234
                    )
                )
                await #expect { try await wrongSize.finished() } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .checksumMismatch && error.description.contains("200000")
                        && error.description.contains("1234")
                }
                let tooLarge = try manager.download(
                    from: server.url("file/300000"),
                    to: directory.appendingPathComponent("b")
                )
                await #expect { try await tooLarge.finished() } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .fileTooLarge && error.description.contains("250000")
                }
                let small = try manager.download(
                    from: server.url("file/250000"),
                    to: directory.appendingPathComponent("c")
                )
                #expect(try await small.finished() == directory.appendingPathComponent("c"))
            }
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("a").path))
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("b").path))
            // No retry for either: one request each.
            #expect(server.requests(to: "/file/200000").count == 1)
            #expect(server.requests(to: "/file/300000").count == 1)
        }
    }

    @Test("a body of unknown length that grows past the maximum fails")
    func unknownLengthPastTheMaximum() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        try server.makeFile("big.bin", size: 400_000)  // served chunked under /chunked/
        var configuration = configuration(directory)
        configuration.maximumFileSize = 100_000
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(
                from: server.url("chunked/big.bin"),
                to: directory.appendingPathComponent("big.bin")
            )
            await #expect { try await download.finished() } throws: { ($0 as? DownloadError)?.code == .fileTooLarge }
        }
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("big.bin").path))
    }

    /// Makes the partial file of `url` → `destination` an empty file, in the state directory of
    /// ``configuration(_:)``; returns its path.
    func makePartial(of url: URL, to destination: URL, in directory: URL) throws -> String {
        let state = directory.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let path = state.appendingPathComponent("\(DownloadID(destination: destination)).part").path
        FileManager.default.createFile(atPath: path, contents: nil)
        return path
    }

    @Test("a full disk fails that download naming the path and the cause; the others go on")
    func fullDisk() async throws {
        try await withFaultServer { server, directory in
            try await withSmallDisk(megabytes: 4) { disk in
                // The disk has room for a journal, not for the file: its partial file cannot be
                // reserved (ENOSPC), as on a full file system.
                try fill(disk, leaving: 160 * 1024)
                let full = disk.appendingPathComponent("full")
                var configuration = configuration(directory)
                configuration.stateDirectory = nil
                try await withDownloadManager(configuration: configuration) { manager in
                    let failing = try manager.download(from: server.url("file/400000"), to: full)
                    let other = try manager.download(
                        from: server.url("file/100000"),
                        to: directory.appendingPathComponent("other")
                    )
                    await #expect { try await failing.finished() } throws: { error in
                        guard let error = error as? DownloadError else { return false }
                        return error.code == .fileSystem && error.errno == ENOSPC
                            && error.path?.hasSuffix("\(failing.id).part") == true
                            && error.description.contains("No space left on device")
                            // Reserved before its first byte: no partial file is said to be kept.
                            && !error.description.contains("kept")
                    }
                    #expect(try await other.finished() == directory.appendingPathComponent("other"))
                }
                #expect(
                    try Data(contentsOf: directory.appendingPathComponent("other")) == FaultServer.body(size: 100_000)
                )
                #expect(!FileManager.default.fileExists(atPath: full.path))
            }
        }
    }

    @Test(
        "a body received whole into its buffer, which a full disk then refuses, is retried only as often as the limit says, then fails with ENOSPC"
    )
    func fullDiskAfterTheWholeBody() async throws {
        try await withFaultServer { server, directory in
            try await withSmallDisk(megabytes: 4) { disk in
                var configuration = configuration(directory)
                configuration.stateDirectory = disk.appendingPathComponent("state")
                configuration.retryLimit = 2
                try await withDownloadManager(configuration: configuration) { manager in
                    // The journal first, while there is room for it.
                    let first = disk.appendingPathComponent("first")
                    #expect(try await manager.download(from: server.url("file/1000"), to: first).finished() == first)
                    // Smaller than a buffer (128 KiB): all of it in memory until the disk lane writes it
                    // at the end, which the full disk refuses. Each attempt receives the whole body
                    // again; none of them brings a byte to the disk, so none resets the count of failed
                    // attempts (they did, and a full disk was retried forever). Room is left for the
                    // journal's rows, not for the body.
                    try fill(disk, leaving: 48 * 1024)
                    let download = try manager.download(
                        from: server.url("file/120000"),
                        to: disk.appendingPathComponent("whole")
                    )
                    var retries = 0
                    var outcome: DownloadError?
                    for await event in download.events {
                        switch event {
                        case .waitingToRetry: retries += 1
                        case .failed(let error): outcome = error
                        default: break
                        }
                        if retries > configuration.retryLimit {
                            Issue.record("retried \(retries) times; the limit is \(configuration.retryLimit)")
                            _ = await download.cancel()
                            break
                        }
                    }
                    #expect(retries == configuration.retryLimit)
                    #expect(outcome?.code == .fileSystem && outcome?.errno == ENOSPC, "\(String(describing: outcome))")
                }
                #expect(!FileManager.default.fileExists(atPath: disk.appendingPathComponent("whole").path))
            }
        }
    }

    @Test("a partial file that refuses writes (as on a read-only file system) fails that download clearly")
    func readOnlyPartial() async throws {
        try await withFaultServer { server, directory in
            // A read-only mount of the partial file refuses writers, root included. Larger than a
            // buffer: written at the partial's path (a body that fits in its buffer is written whole
            // into a new file, which replaces whatever is at that path).
            let destination = directory.appendingPathComponent("ro")
            let partial = try makePartial(of: server.url("file/300000"), to: destination, in: directory)
            try await withReadOnlyFile(partial) {
                try await withDownloadManager(configuration: configuration(directory)) { manager in
                    let download = try manager.download(from: server.url("file/300000"), to: destination)
                    await #expect { try await download.finished() } throws: { error in
                        guard let error = error as? DownloadError else { return false }
                        return error.code == .fileSystem && error.errno == EROFS && error.path == partial
                            && error.url == server.url("file/300000").absoluteString
                    }
                }
            }
            #expect(!FileManager.default.fileExists(atPath: destination.path))
        }
    }

    @Test("an unwritable destination fails clearly, keeps the partial, and a later run places it without re-sending")
    func unwritableDestination() async throws {
        try await withFaultServer { server, directory in
            // The destination's folder is a regular file: the rename into place fails (ENOTDIR), even for root.
            let blocker = directory.appendingPathComponent("folder")
            try Data("not a folder".utf8).write(to: blocker)
            let destination = blocker.appendingPathComponent("file.bin")
            try await withDownloadManager(configuration: configuration(directory)) { manager in
                let download = try manager.download(from: server.url("file/150000"), to: destination)
                await #expect { try await download.finished() } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .fileSystem && error.path == destination.path && !error.isTransient
                }
            }
            try FileManager.default.removeItem(at: blocker)
            try FileManager.default.createDirectory(at: blocker, withIntermediateDirectories: true)
            try await withDownloadManager(configuration: configuration(directory)) { manager in
                let download = try manager.download(from: server.url("file/150000"), to: destination)
                #expect(try await download.finished() == destination)
            }
            #expect(try Data(contentsOf: destination) == FaultServer.body(size: 150_000))
            #expect(server.requests(to: "/file/150000").map(\.status) == [200, 416])
        }
    }

    @Test func checksumParsing() {
        #expect(Checksum("sha256:" + String(repeating: "A", count: 64))?.hex == String(repeating: "a", count: 64))
        #expect(Checksum("MD5:" + String(repeating: "0", count: 32))?.algorithm == .md5)
        #expect(
            Checksum("sha1:" + String(repeating: "f", count: 40))?.description == "sha1:"
                + String(repeating: "f", count: 40)
        )
        for bad in [
            "", "sha256", "sha256:", "sha256:abc", "sha512:" + String(repeating: "a", count: 128),
            "md5:" + String(repeating: "g", count: 32), "sha1:" + String(repeating: "a", count: 41), ":::",
        ] {
            #expect(Checksum(bad) == nil, "\(bad)")
        }
    }
}
