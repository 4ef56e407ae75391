import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport

/// Resumes against servers nobody here wrote: Apache httpd and lighttpd, each with its own ETags
/// (Apache's `"size-mtime"`, weak for a file modified in the last second; lighttpd's hash), its own
/// `Content-Range` and its own reading of `If-Range`.
@Suite("Resumes against Apache and lighttpd")
struct OtherServerTests {
    static let size = 1_536 * 1024

    /// A first manager that receives at most 256 KiB a second, stopped once `bytes` have arrived:
    /// the partial file and its row stay for the next manager.
    private func interrupted(
        _ url: URL,
        to destination: URL,
        state: URL,
        after bytes: Int64,
        connections: Int = 1
    ) async throws {
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        configuration.connectionsPerFile = connections
        configuration.minimumSegmentSize = 256 * 1024
        configuration.rateLimits.perDownload = 256 * 1024
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(from: url, to: destination)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived >= bytes } else { false } }
        }
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }

    private func finished(_ url: URL, to destination: URL, state: URL, connections: Int = 1) async throws {
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        configuration.connectionsPerFile = connections
        configuration.minimumSegmentSize = 256 * 1024
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(from: url, to: destination)
            #expect(try await download.finished() == destination)
        }
    }

    /// A started server of `kind`, and for its file `name`: its URL, a destination of that name in
    /// a scratch folder and a state folder beside it, for `body`.
    private func with(
        _ kind: OtherWebServer.Kind,
        file name: String,
        _ body: (OtherWebServer, _ url: URL, _ destination: URL, _ state: URL) async throws -> Void
    ) async throws {
        let server = try await OtherWebServer.start(kind)
        defer { server.stop() }
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(
            server,
            server.url(name),
            directory.appendingPathComponent(name),
            directory.appendingPathComponent("state")
        )
    }

    @Test(
        "an interrupted download goes on from its partial file with Range and the server's own validator in If-Range",
        arguments: OtherWebServer.Kind.allCases
    )
    func resumesWithTheServersValidator(_ kind: OtherWebServer.Kind) async throws {
        try await with(kind, file: "big.bin") { server, url, destination, state in
            let source = try server.makeFile("big.bin", size: Self.size, seed: 9101)
            try await interrupted(url, to: destination, state: state, after: 512 * 1024)
            try await finished(url, to: destination, state: state)

            #expect(try Data(contentsOf: destination) == source)
            let asked = await server.requests(to: "/big.bin", atLeast: 2)
            let resumed = try #require(asked.last, "\(asked)")
            let first = Int(resumed.range.dropFirst("bytes=".count).dropLast()) ?? -1
            #expect(asked.count == 2 && asked.first?.range == "-", "\(asked)")
            #expect(resumed.status == 206 && first >= 256 * 1024 && resumed.ifRange.hasPrefix("\""), "\(asked)")
        }
    }

    @Test(
        "a file replaced on the server between two runs is fetched anew from its first byte, never spliced onto the old one's",
        arguments: OtherWebServer.Kind.allCases
    )
    func aReplacedFileIsFetchedAnew(_ kind: OtherWebServer.Kind) async throws {
        try await with(kind, file: "big.bin") { server, url, destination, state in
            try server.makeFile("big.bin", size: Self.size, seed: 9102, age: 120)
            try await interrupted(url, to: destination, state: state, after: 512 * 1024)
            // The same length, other bytes, another time and inode: what a deployment does.
            let replacement = try server.makeFile("big.bin", size: Self.size, seed: 9103, age: 60)
            try await finished(url, to: destination, state: state)

            #expect(try Data(contentsOf: destination) == replacement)
            let asked = await server.requests(to: "/big.bin", atLeast: 2)
            // The resume asked with the old validator; the server answered with the whole new file.
            let resumed = try #require(asked.last, "\(asked)")
            #expect(resumed.range.hasPrefix("bytes=") && resumed.ifRange.hasPrefix("\""), "\(asked)")
            #expect(resumed.status == 200 && asked.count == 2, "\(asked)")
        }
    }

    @Test(
        "a file replaced on Apache by one dated in the future (its ETag weak) is fetched anew, not retried until the download fails",
        arguments: [1, 4]
    )
    func aReplacementWithOnlyAWeakETagIsFetchedAnew(connections: Int) async throws {
        try await with(.apache, file: "skew.bin") { server, url, destination, state in
            try server.makeFile("skew.bin", size: Self.size, seed: 9105, age: 120)
            try await interrupted(url, to: destination, state: state, after: 512 * 1024, connections: connections)
            let before = await server.requests(to: "/skew.bin", atLeast: connections).count
            // Before: "carries no strong ETag, where the file has one", retried until the download failed.
            let replacement = try server.makeFile("skew.bin", size: Self.size, seed: 9106, age: -3600)
            try await finished(url, to: destination, state: state, connections: connections)

            #expect(try Data(contentsOf: destination) == replacement)
            // The next run's first request asked for the rest (of its first segment left) under the
            // old ETag; the whole new file came back.
            let asked = await server.requests(to: "/skew.bin", atLeast: before + 1).dropFirst(before)
            #expect(asked.contains { $0.status == 200 && $0.ifRange.hasPrefix("\"") }, "\(asked)")
            #expect(connections > 1 || asked.count == 1, "\(asked)")
        }
    }

    @Test(
        "a file whose validators Apache calls weak (modified after the moment it is served) is not continued on them: fetched anew, whole"
    )
    func weakValidatorsAreNotTrusted() async throws {
        try await with(.apache, file: "weak.bin") { server, url, destination, state in
            // Modified an hour from now: Apache sends `W/"…"` and a Last-Modified no older than its Date.
            let source = try server.makeFile("weak.bin", size: Self.size, seed: 9104, age: -3600)
            try await interrupted(url, to: destination, state: state, after: 512 * 1024)
            try await finished(url, to: destination, state: state)

            #expect(try Data(contentsOf: destination) == source)
            let asked = await server.requests(to: "/weak.bin", atLeast: 2)
            // Never a weak validator in If-Range (RFC 9110 §13.1.5), and nothing continued without one.
            #expect(asked.count == 2 && asked.allSatisfy { !$0.ifRange.hasPrefix("W/") }, "\(asked)")
            #expect(asked.last?.status == 200 && asked.last?.range == "-", "\(asked)")
        }
    }
}
