import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 43, items 4 and 5: `-c/--continue` for a file another tool left, and `-m/--max-time`.
extension HaulCLITests {
    /// Writes the first `count` bytes of `source` to `path` with `head -c`, as a user's earlier
    /// `curl -o` that was stopped would have left them.
    func headBytes(_ count: Int, of source: URL, to path: String) async throws {
        let shell = try ChildProcess("/bin/sh", ["-c", "head -c \(count) '\(source.path)' > '\(path)'"])
        #expect(await shell.exited() == 0)
        #expect(FilePath.fileLength(path) == Int64(count))
    }

    @Test(
        "-c continues a partial made with head -c: the rest asked for with 64 KiB of overlap, checked; without -c, fetched whole"
    )
    func continuesAFileLeftByAnotherTool() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let size = 3 * 1024 * 1024
        let source = try server.makeFile("left.bin", size: size, seed: 431)
        let kept = 1024 * 1024 + 4321
        let destination = work.appendingPathComponent("left.bin").path
        try await headBytes(kept, of: server.root.appendingPathComponent("left.bin"), to: destination)
        // curl's spelling, -C -, is -c.
        let run = try await haul(["-C", "-", "-o", destination, server.url("left.bin").absoluteString], in: work)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: destination)) == source)
        let asked = server.accessLog().filter { $0.uri == "/left.bin" }
        let overlapStart = kept - 64 * 1024
        #expect(asked.map(\.range) == ["bytes=\(overlapStart)-"], "\(asked)")
        #expect(asked.map(\.status) == [206] && asked.first?.bytesSent == Int64(size - overlapStart), "\(asked)")

        // The same without -c: the file there is the user's, fetched whole and replaced (today's way).
        let other = work.appendingPathComponent("whole.bin").path
        try await headBytes(kept, of: server.root.appendingPathComponent("left.bin"), to: other)
        let whole = try await haul(["-o", other, server.url("left.bin?whole").absoluteString], in: work)
        #expect(whole.status == 0, "\(whole.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: other)) == source)
        let fetched = server.accessLog().filter { $0.uri == "/left.bin?whole" }
        #expect(fetched.map(\.range) == ["-"] && fetched.map(\.status) == [200], "\(fetched)")
    }

    @Test(
        "-c with a file that is not the server's start, one longer than it, or a server that ignores ranges: fetched whole, right"
    )
    func continuesOnlyWhatTheOverlapProves() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let size = 2 * 1024 * 1024
        let source = try server.makeFile("proof.bin", size: size, seed: 432)
        // Another file's first bytes: the overlap differs.
        let stranger = work.appendingPathComponent("stranger.bin").path
        try NginxServer.bytes(count: 700_000, seed: 999).write(to: URL(fileURLWithPath: stranger))
        // The server's file with bytes after its end.
        let longer = work.appendingPathComponent("longer.bin").path
        try (source + Data(repeating: 7, count: 5000)).write(to: URL(fileURLWithPath: longer))
        // A server that answers every range with the whole file.
        let ignored = work.appendingPathComponent("ignored.bin").path
        try await headBytes(600_000, of: server.root.appendingPathComponent("proof.bin"), to: ignored)
        for (path, url) in [
            (stranger, server.url("proof.bin?stranger")), (longer, server.url("proof.bin?longer")),
            (ignored, server.url("norange/proof.bin")),
        ] {
            let run = try await haul(["-c", "-o", path, url.absoluteString], in: work)
            #expect(run.status == 0, "\(path): \(run.stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == source, "\(path)")
        }
        // Each ended with an answer of the whole file, from its first byte.
        for uri in ["/proof.bin?stranger", "/proof.bin?longer", "/norange/proof.bin"] {
            let asked = server.accessLog().filter { $0.uri == uri }
            #expect(asked.first?.range.hasPrefix("bytes=") == true, "\(uri): \(asked)")
            #expect(asked.last?.status == 200 && asked.last?.bytesSent == Int64(size), "\(uri): \(asked)")
        }
    }

    @Test(
        "-c keeps the file as it was when the download fails; named from the URL, the file there is continued, not name.1"
    )
    func continuedFileStaysUntilComplete() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("named.bin", size: 1024 * 1024, seed: 433)
        let folder = work.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let mine = Data("the user's own bytes, not the server's".utf8)
        let missing = folder.appendingPathComponent("missing.bin")
        try mine.write(to: missing)
        let failed = try await haul(["-c", "-o", missing.path, server.url("missing.bin").absoluteString], in: work)
        #expect(failed.status == 2, "\(failed.stderr)")
        #expect(try Data(contentsOf: missing) == mine)

        let named = folder.appendingPathComponent("named.bin")
        try await headBytes(300_000, of: server.root.appendingPathComponent("named.bin"), to: named.path)
        let run = try await haul(["-c", "-o", folder.path + "/", server.url("named.bin").absoluteString], in: work)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try Data(contentsOf: named) == source)
        #expect(!FileManager.default.fileExists(atPath: named.path + ".1"))
        #expect(server.accessLog().filter { $0.uri == "/named.bin" }.map(\.status) == [206])
    }

    @Test("-m stops the run in time: downloads paused with their bytes, exit 28, said so; the next run goes on")
    func maxTimeStopsTheRun() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let size = 1024 * 1024 + 64 * 1024
        let source = try server.makeFile("timed.bin", size: size, seed: 434)
        let destination = work.appendingPathComponent("timed.bin").path
        // /gated/: 1 MiB at once, then 1 KB/s: still running when the time is up.
        let url = server.url("gated/timed.bin").absoluteString
        let run = try await haul(["--json", "-m", "1.5", "-o", destination, url], in: work)
        #expect(run.status == 28, "\(run.stderr)")
        let summary = try #require(run.stdout.split(separator: "\n").last.map(String.init))
        #expect(summary.contains("\"timeLimitReached\":true") && summary.contains("\"interrupted\":true"), "\(summary)")
        #expect(run.stdout.contains("\"event\":\"paused\""), "\(run.stdout)")
        #expect(!FileManager.default.fileExists(atPath: destination))
        let plain = try await haul(["-m0.5", "-o", work.appendingPathComponent("t2.bin").path, url + "?2"], in: work)
        #expect(plain.status == 28 && plain.stdout.contains("stopped at --max-time (0.5 s)"), "\(plain.stdout)")

        let again = try await haul(["-o", destination, url], in: work)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: destination)) == source)
        let asked = server.accessLog().filter { $0.uri == "/gated/timed.bin" }
        #expect(asked.count == 2 && asked.last?.range.hasPrefix("bytes=") == true, "\(asked)")
        #expect(asked.last.map { $0.bytesSent < Int64(size) } == true, "\(asked)")
    }

    @Test(
        "-c and -m refused where they mean nothing",
        arguments: [
            ["-c", "--discard"], ["-c", "--content-disposition"], ["-c", "-o", "-"], ["-m", "0"], ["-m", "nan"],
            ["-C", "100"], ["-n", "--no-netrc"],
        ]
    )
    func continueAndMaxTimeRefused(_ options: [String]) async throws {
        let work = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let run = try await haul(options + ["http://127.0.0.1:1/x.bin"], in: work)
        #expect(run.status == 64, "\(options): \(run.stderr)")
        #expect(
            ["-c ", "--max-time", "-C takes -", "--no-netrc"].contains { run.stderr.contains($0) },
            "\(run.stderr)"
        )
    }
}
