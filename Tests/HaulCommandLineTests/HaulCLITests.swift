import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// The `haul` executable, run as a user would, against nginx.
@Suite("haul: the command", .timeLimit(.minutes(2)))
struct HaulCLITests {
    static var haulPath: String { HaulBinary.path }

    typealias Run = HaulBinary.Run

    func haul(_ arguments: [String], in directory: URL, environment: [String: String]? = nil) async throws -> Run {
        try await HaulBinary.run(arguments, in: directory, environment: environment)
    }

    @Test("downloads several URLs into a directory that then holds only the files and .haul")
    func severalURLs() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let a = try server.makeFile("a.bin", size: 700_000, seed: 3)
        let b = try server.makeFile("sub/b.bin", size: 1_234, seed: 4)
        let output = work.appendingPathComponent("out")
        let run = try await haul(
            ["-o", output.path, server.url("a.bin").absoluteString, server.url("sub/b.bin").absoluteString],
            in: work
        )
        #expect(run.status == 0, "\(run.stderr)")
        // The folder -o names for several URLs is made, and said (not silently).
        #expect(
            run.stderr
                == "haul: made the folder '\(output.path)' for 2 URLs (-o names a folder when several URLs are given)\n",
            "\(run.stderr)"
        )
        #expect(run.stdout.contains("2 completed, 0 failed"))
        #expect(try Data(contentsOf: output.appendingPathComponent("a.bin")) == a)
        #expect(try Data(contentsOf: output.appendingPathComponent("b.bin")) == b)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: output.path).sorted() == [".haul", "a.bin", "b.bin"]
        )
    }

    @Test(
        "a file already there that haul did not download is kept: the download gets a.bin.1, and running again changes nothing"
    )
    func existingFileIsKept() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let a = try server.makeFile("a.bin", size: 300_000, seed: 5)
        let output = work.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        let mine = Data("the user's own a.bin\n".utf8)
        try mine.write(to: output.appendingPathComponent("a.bin"))
        let arguments = ["-o", output.path, server.url("a.bin").absoluteString]
        let first = try await haul(arguments, in: work)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("-> \(output.path)/a.bin.1"), "\(first.stdout)")
        #expect(try Data(contentsOf: output.appendingPathComponent("a.bin")) == mine)
        #expect(try Data(contentsOf: output.appendingPathComponent("a.bin.1")) == a)
        #expect(server.accessLog().filter { $0.uri == "/a.bin" }.count == 1)
        // Again: a.bin.1 is this URL's download in the journal, so it is the one kept (no a.bin.2, no transfer).
        let second = try await haul(arguments, in: work)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout.contains("-> \(output.path)/a.bin.1"), "\(second.stdout)")
        #expect(server.accessLog().filter { $0.uri == "/a.bin" }.count == 1)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: output.path).sorted() == [".haul", "a.bin", "a.bin.1"]
        )
        #expect(try Data(contentsOf: output.appendingPathComponent("a.bin")) == mine)
    }

    @Test(
        "bad input is one line on stderr and a non-zero status, never a crash",
        arguments: [
            ["not a url at all"], ["ftp://example.com/file"], ["http://"], ["-i", "/nonexistent/list.txt"],
            ["-o", "/proc/version/sub", "http://127.0.0.1:1/a"], ["--checksum", "sha256:xyz", "http://h/a"],
            ["-j", "x", "http://h/a"],
        ]
    )
    func badInput(_ arguments: [String]) async throws {
        let work = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let run = try await haul(
            arguments + ["--quiet", "--state", work.appendingPathComponent("state").path],
            in: work
        )
        #expect(run.status != 0 && run.status < 128, "status \(run.status)")
        #expect(
            !run.stderr.contains("Fatal error") && !run.stderr.contains("Stack dump")
                && !run.stderr.contains("backtrace")
        )
        // One line says what is wrong ("haul: …", or the argument parser's "Error: …" with its usage).
        let lines = run.stderr.split(separator: "\n").filter { $0.hasPrefix("haul: ") || $0.hasPrefix("Error: ") }
        #expect(lines.count == 1, "\(run.stderr)")
    }

    @Test("-o - writes the body to standard output (a file here) and what haul says to standard error")
    func outputToStandardOutput() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("s.bin", size: 700_000)
        // haul runs in this process's working directory, where "-" (and its .haul) would be written.
        let dash = FileManager.default.currentDirectoryPath + "/-"
        defer { unlink(dash) }
        let body = work.appendingPathComponent("stdout.bin").path
        let messages = work.appendingPathComponent("stderr.txt").path
        let process = try ChildProcess(
            Self.haulPath,
            ["-o", "-", server.url("s.bin").absoluteString],
            stdout: body,
            stderr: messages
        )
        #expect(await process.exited() == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: body)) == source)
        let said = try String(contentsOfFile: messages, encoding: .utf8)
        #expect(said.contains("completed") && said.contains("/dev/stdout"), "\(said)")
        #expect(!FileManager.default.fileExists(atPath: dash))
        #expect(
            !FileManager.default.fileExists(atPath: FileManager.default.currentDirectoryPath + "/.haul/journal.sqlite")
        )
        // One stream, one body: two URLs are refused before anything is fetched.
        let two = try await haul(
            ["-o", "-", server.url("s.bin").absoluteString, server.url("s.bin").absoluteString],
            in: work
        )
        #expect(two.status == 64 && two.stderr.contains("takes one URL"), "\(two.stderr)")
        #expect(server.accessLog().filter { $0.uri == "/s.bin" }.count == 1)
    }

    @Test("--checksum: a wrong digest fails with both values, exit 6, nothing at the destination")
    func wrongChecksum() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        try server.makeFile("c.bin", size: 40_000)
        let wrong = "sha1:" + String(repeating: "0", count: 40)
        let run = try await haul(
            ["-o", work.appendingPathComponent("c.bin").path, "--checksum", wrong, server.url("c.bin").absoluteString],
            in: work
        )
        #expect(run.status == 6)  // a check failed
        let lines = run.stderr.split(separator: "\n")
        #expect(
            lines.count == 1 && lines[0].contains(String(repeating: "0", count: 40)) && lines[0].contains("c.bin"),
            "\(run.stderr)"
        )
        #expect(!FileManager.default.fileExists(atPath: work.appendingPathComponent("c.bin").path))
    }

    @Test(
        "--checksum on a file downloaded before is checked, not remembered: a wrong one fails, a corrupted file is fetched again"
    )
    func checksumOfAFileDownloadedBefore() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("v.bin", size: 300_000)
        let url = server.url("v.bin").absoluteString
        let output = work.appendingPathComponent("v.bin")
        let right =
            "sha256:"
            + (try HaulValues.Checksum.digest(
                ofFileAt: server.root.appendingPathComponent("v.bin").path,
                algorithm: .sha256
            ))
        #expect(try await haul(["-o", output.path, url], in: work).status == 0)
        // Corrupted in place, its length and mtime kept: with the checksum, fetched again, whole.
        // (Before: "already complete", exit 0.)
        func corrupt() throws {
            let modified = try FileManager.default.attributesOfItem(atPath: output.path)[.modificationDate] as! Date
            var corrupted = source
            corrupted[150_000] ^= 0xFF
            let handle = try FileHandle(forWritingTo: output)
            try handle.write(contentsOf: corrupted)
            try handle.close()
            try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: output.path)
        }
        try corrupt()
        let requestsBefore = server.accessLog().filter { $0.uri == "/v.bin" }.count
        let repaired = try await haul(["-o", output.path, "--checksum", right, url], in: work)
        #expect(repaired.status == 0, "\(repaired.stderr)")
        #expect(!repaired.stdout.contains("already complete"), "\(repaired.stdout)")
        #expect(try Data(contentsOf: output) == source)
        #expect(server.accessLog().filter { $0.uri == "/v.bin" }.count == requestsBefore + 1)
        // Intact and matching: nothing is fetched.
        let again = try await haul(["-o", output.path, "--checksum", right, url], in: work)
        #expect(again.status == 0 && again.stdout.contains("already complete"), "\(again.stdout)")
        #expect(server.accessLog().filter { $0.uri == "/v.bin" }.count == requestsBefore + 1)
        // --verify hashes what the journal recorded, without fetching.
        let verified = try await haul(["--verify", "-o", work.path], in: work)
        #expect(
            verified.status == 0 && verified.stdout.contains("ok") && verified.stdout.contains("v.bin"),
            "\(verified.stdout)"
        )
        try corrupt()
        let caught = try await haul(["--verify", "--json", "-o", work.path], in: work)
        #expect(caught.status == 1, "\(caught.stdout)\(caught.stderr)")
        #expect(caught.stdout.contains("\"result\":\"differs\"") && caught.stdout.contains(right), "\(caught.stdout)")
        #expect(server.accessLog().filter { $0.uri == "/v.bin" }.count == requestsBefore + 1)
        #expect(try await haul(["-o", output.path, "--checksum", right, url], in: work).status == 0)
        #expect(try Data(contentsOf: output) == source)
        // A wrong checksum on the complete file: fetched again, checked, failed; the file stays.
        // (Before: "already complete", exit 0.)
        let wrong = try await haul(
            ["-o", output.path, "--checksum", "sha256:" + String(repeating: "ab", count: 32), url],
            in: work
        )
        #expect(wrong.status == 6, "\(wrong.stdout)\(wrong.stderr)")
        #expect(wrong.stderr.contains(String(repeating: "ab", count: 32)), "\(wrong.stderr)")
        #expect(try Data(contentsOf: output) == source)
    }

    @Test(
        "--checksum again into a folder over a file haul placed that fails it: replaced, not set beside; --verify's advice repairs"
    )
    func checksumIntoAFolderReplaces() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("w.bin", size: 200_000, seed: 58)
        let url = server.url("w.bin").absoluteString
        let folder = work.appendingPathComponent("out")
        let file = folder.appendingPathComponent("w.bin")
        let right =
            "sha256:"
            + (try HaulValues.Checksum.digest(
                ofFileAt: server.root.appendingPathComponent("w.bin").path,
                algorithm: .sha256
            ))
        #expect(try await haul(["--checksum", right, "-o", folder.path + "/", url], in: work).status == 0)
        // Damaged as a tool that rewrites it would: bytes and mtime changed.
        func damage() throws {
            var damaged = source
            damaged[100_000] ^= 0xFF
            try damaged.write(to: file)
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSinceNow: 5)],
                ofItemAtPath: file.path
            )
        }
        try damage()
        // Before: the good copy went to w.bin.1, the bad one stayed, exit 0.
        let again = try await haul(["--checksum", right, "-o", folder.path + "/", url], in: work)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try Data(contentsOf: file) == source)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == [".haul", "w.bin"])
        // --verify names a file that differs with the command that repairs it; run as written, it does.
        try damage()
        let verified = try await haul(["--verify", "-o", folder.path + "/"], in: work)
        #expect(verified.status == 1, "\(verified.stdout)")
        let advice = try #require(verified.stdout.components(separatedBy: "to fetch it again and replace it: ").last)
        let words = advice.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ").map(String.init)
        #expect(words.first == "haul" && words.contains(right) && words.contains(file.path), "\(advice)")
        let repaired = try await haul(Array(words.dropFirst()), in: FileManager.default.temporaryDirectory)
        #expect(repaired.status == 0, "\(repaired.stdout)\(repaired.stderr)")
        #expect(try Data(contentsOf: file) == source)
        #expect(try await haul(["--verify", "-o", folder.path + "/"], in: work).status == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == [".haul", "w.bin"])
    }

    @Test(
        "-o at a FIFO nobody reads: --max-time (as a signal) stops the wait for a reader; a reader that comes later is served"
    )
    func fifoWithoutReader() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("w.bin", size: 300_000)
        let fifo = work.appendingPathComponent("unread").path
        #expect(mkfifo(fifo, 0o644) == 0)
        // It waited in open(2) until a reader came: a Ctrl-C or --max-time did not end it.
        let stopped = try await haul(["--max-time", "0.5", "-o", fifo, server.url("w.bin").absoluteString], in: work)
        #expect(stopped.status == 28, "\(stopped.stderr)")
        #expect(stopped.stdout.contains("0 completed, 0 failed"), "\(stopped.stdout)")
        #expect(!stopped.stderr.contains("partial file is kept"), "\(stopped.stderr)")
        // The reader opens the FIFO after haul started (most likely while it waits).
        let process = try ChildProcess(
            Self.haulPath,
            ["--state", "\(work.path)/state", "-o", fifo, server.url("w.bin").absoluteString],
            stdout: "/dev/null",
            stderr: "/dev/null"
        )
        let reader = StreamReader.fifo(fifo)
        #expect(await process.exited() == 0)
        #expect(await reader.everything() == source)
    }

    @Test(
        "-o at a FIFO or a device: written through, left as it was, no .haul beside it; -o at a symlink: placed at its target"
    )
    func specialDestinations() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("s.bin", size: 500_000)
        let folder = work.appendingPathComponent("specials")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let fifo = folder.appendingPathComponent("pipe").path
        #expect(mkfifo(fifo, 0o644) == 0)
        let device = folder.appendingPathComponent("null").path
        try #require(mknod(device, S_IFCHR | 0o666, dev_t((1 << 8) | 3)) == 0, "mknod needs root, as CI runs")
        let reader = StreamReader.fifo(fifo)
        let piped = try await haul(["-o", fifo, server.url("s.bin").absoluteString], in: work)
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(await reader.everything() == source)
        let nulled = try await haul(["-o", device, server.url("s.bin").absoluteString], in: work)
        #expect(nulled.status == 0 && nulled.stdout.contains("completed"), "\(nulled.stderr)")
        var status = stat()
        #expect(lstat(fifo, &status) == 0 && status.st_mode & S_IFMT == S_IFIFO)
        #expect(lstat(device, &status) == 0 && status.st_mode & S_IFMT == S_IFCHR)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["null", "pipe"])
        let target = folder.appendingPathComponent("target.bin")
        try Data("old".utf8).write(to: target)
        #expect(symlink("target.bin", folder.appendingPathComponent("link.bin").path) == 0)
        let linked = try await haul(
            ["-o", folder.appendingPathComponent("link.bin").path, server.url("s.bin").absoluteString],
            in: work
        )
        #expect(linked.status == 0, "\(linked.stderr)")
        #expect(try Data(contentsOf: target) == source)
        #expect(
            lstat(folder.appendingPathComponent("link.bin").path, &status) == 0 && status.st_mode & S_IFMT == S_IFLNK
        )
    }
}
