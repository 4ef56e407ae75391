import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulCLI
@testable import HaulTestSupport
@testable import HaulValues

/// What a new user tripped over (issue 17), through the binary.
extension HaulCLITests {
    /// Starts `haul` with `arguments` and waits (bounded) until its JSON events, written to `events`,
    /// report received bytes.
    func startReceiving(
        _ arguments: [String],
        events: String,
        ignoringSIGINT: Bool = false
    ) async throws -> ChildProcess {
        let process: ChildProcess
        if ignoringSIGINT {
            // What a shell does for a background job: SIGINT ignored, then exec.
            process = try ChildProcess(
                "/bin/sh",
                ["-c", "trap '' INT; exec \"$0\" \"$@\"", Self.haulPath] + arguments,
                stdout: events
            )
        } else {
            process = try ChildProcess(Self.haulPath, arguments, stdout: events)
        }
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(20)
        func progressed() -> Bool {
            ((try? String(contentsOfFile: events, encoding: .utf8)) ?? "").contains("\"event\":\"progress\"")
        }
        while clock.now < deadline, process.isRunning {
            if progressed() { return process }
            try await Task.sleep(for: .milliseconds(10))
        }
        // Looked at once more: this task may have been held up past the deadline (the whole suite
        // on two cores) while haul reported in time.
        if progressed() { return process }
        Issue.record(
            "haul reported no progress: \((try? String(contentsOfFile: events, encoding: .utf8)) ?? "no output")"
        )
        return process
    }

    /// The bytes a summary line says this run received ("… 1.5 MiB received in …").
    func receivedBytes(inSummary text: String) -> Double? {
        guard let line = text.split(separator: "\n").last(where: { $0.contains(" received in ") }) else { return nil }
        let words = line.split(separator: " ")
        guard let index = words.firstIndex(of: "received"), index >= 2, let value = Double(words[index - 2]) else {
            return nil
        }
        let units = ["B": 1.0, "KiB": 1024.0, "MiB": 1_048_576.0, "GiB": 1_073_741_824.0]
        return units[String(words[index - 1])].map { value * $0 }
    }

    @Test("a file replaced without validators is fetched anew, and the line says why and what the flag would do")
    func noValidatorRestartIsExplained() async throws {
        try await withFaultServer { server, work in
            let path = "plain-changing/150000/400000"
            let output = work.appendingPathComponent("out.bin")
            let run = try await haul(["--retries", "2", "-o", output.path, server.url(path).absoluteString], in: work)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(try Data(contentsOf: output) == FaultServer.body(size: 400_000, version: 2))
            #expect(
                run.stdout.contains("restarted \(server.url(path).absoluteString): the server sends no strong ETag")
            )
            #expect(run.stdout.contains("--resume-unvalidated"))
        }
    }

    @Test("started with SIGINT ignored (a shell's background job), haul keeps it ignored and finishes")
    func ignoredSIGINTStaysIgnored() async throws {
        let (server, work) = try startFaultServerAndDirectory()
        defer { stop(server, work) }
        // The fault server's gate holds the answer after 1 MiB until the signal was sent: it arrives
        // mid-transfer however loaded the machine (before: nginx's /paced/, eight seconds at 16 KB/s).
        let size = 1024 * 1024 + 128 * 1024
        let output = work.appendingPathComponent("out")
        let events = work.appendingPathComponent("bg.jsonl").path
        let process = try await startReceiving(
            ["--json", "-o", output.path + "/", server.url("gate/1048576/\(size)").absoluteString],
            events: events,
            ignoringSIGINT: true
        )
        process.signal(SIGINT)
        server.openGate()
        #expect(await process.exited() == 0)
        #expect(try Data(contentsOf: output.appendingPathComponent(String(size))) == FaultServer.body(size: size))
        let text = try String(contentsOfFile: events, encoding: .utf8)
        #expect(!text.contains("\"event\":\"paused\""))
    }

    @Test(
        "SIGHUP pauses like SIGTERM: bytes kept, exit 129; the summary counts the bytes received, and the next run only the rest"
    )
    func hangUpPausesAndCountsAreHonest() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let size = 3 * 1024 * 1024
        let data = try server.makeFile("hup.bin", size: size)
        let url = server.url("gated/hup.bin").absoluteString
        let output = work.appendingPathComponent("out")
        let events = work.appendingPathComponent("hup.jsonl").path
        let first = try await startReceiving(["--json", "-o", output.path + "/", url], events: events)

        // A listing while the download runs: read-only, the row live.
        let listed = try await haul(
            ["--list", "--json", "--state", output.appendingPathComponent(".haul").path],
            in: work
        )
        #expect(listed.status == 0, "\(listed.stderr)")
        let live = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])
        #expect(live["state"] as? String == "running")

        first.signal(SIGHUP)
        #expect(await first.exited() == 129)
        let lines = try String(contentsOfFile: events, encoding: .utf8).split(separator: "\n")
        #expect(lines.dropLast().last?.contains("\"event\":\"paused\"") == true)
        #expect(lines.last?.contains("\"event\":\"summary\"") == true)
        #expect(!FileManager.default.fileExists(atPath: output.appendingPathComponent("hup.bin").path))

        // The text listing spells the state out whole.
        let between = try await haul(["--list", "--state", output.appendingPathComponent(".haul").path], in: work)
        #expect(between.stdout.hasPrefix("interrupted "), "\(between.stdout)")

        // An interrupted run in text mode reports what it received, not 0 B.
        unlink(output.appendingPathComponent(".haul/journal.sqlite").path)  // start from nothing
        for name in (try? FileManager.default.contentsOfDirectory(atPath: output.appendingPathComponent(".haul").path))
            ?? []
        {
            unlink(output.appendingPathComponent(".haul/\(name)").path)
        }
        let summaryFile = work.appendingPathComponent("summary.txt").path
        let interrupted = try ChildProcess(Self.haulPath, ["-o", output.path + "/", url], stdout: summaryFile)
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(20)
        // No events in text mode: wait for the partial file to hold bytes.
        while clock.now < deadline, interrupted.isRunning {
            let parts =
                (try? FileManager.default.contentsOfDirectory(atPath: output.appendingPathComponent(".haul").path))
                ?? []
            if let part = parts.first(where: { $0.hasSuffix(".part") }),
                (FilePath.fileLength(output.appendingPathComponent(".haul/\(part)").path) ?? 0) > 0
            {
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        interrupted.signal(SIGINT)
        #expect(await interrupted.exited() == 130)
        let summary = try String(contentsOfFile: summaryFile, encoding: .utf8)
        let before = try #require(receivedBytes(inSummary: summary), "\(summary)")
        #expect(before >= 1_000_000, "\(summary)")
        #expect(summary.contains("0 completed, 0 failed"))

        // The next run receives the rest only, and says so.
        let second = try await haul(["-o", output.path + "/", url], in: work)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try Data(contentsOf: output.appendingPathComponent("hup.bin")) == data)
        let rest = try #require(receivedBytes(inSummary: second.stdout), "\(second.stdout)")
        #expect(rest < Double(size) - 900_000, "\(second.stdout)")
        #expect(second.stdout.contains("1 completed, 0 failed"))

        // A run that finds the file complete sends nothing and says so.
        let third = try await haul(["-o", output.path + "/", url], in: work)
        #expect(third.status == 0)
        #expect(third.stdout.contains("already complete \(url) -> "), "\(third.stdout)")
        #expect(third.stdout.contains("1 completed (1 already complete), 0 failed, 0 B received"), "\(third.stdout)")
    }
}

extension HaulCLITests {
    @Test("--json: a relative -o is absolute in every event")
    func jsonPathsAreAbsolute() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("rel.bin", size: 200_000, seed: 26)
        let out = work.appendingPathComponent("json.txt").path
        // Run in `work` (the shell changes to it, then is replaced by haul).
        let process = try ChildProcess(
            "/bin/sh",
            ["-c", "cd \"$0\" && exec \"$@\"", work.path, Self.haulPath]
                + ["--json", "-o", "./sub/../rel.bin", server.url("rel.bin").absoluteString],
            stdout: out
        )
        #expect(await process.exited() == 0)
        let lines = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n").map {
            try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        let paths = lines.compactMap { $0["path"] as? String }
        #expect(paths.count == lines.count - 1)  // all but the summary
        #expect(paths.allSatisfy { $0 == work.appendingPathComponent("rel.bin").path }, "\(paths)")
    }

    @Test("--version, -q and --max-redirects do what curl's and wget's users expect")
    func expectedFlags() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let version = try await haul(["--version"], in: work)
        #expect(version.status == 0)
        #expect(version.stdout == DownloadManager.version + "\n")

        let data = try server.makeFile("r.bin", size: 50_000, seed: 21)
        let quiet = try await haul(
            ["-q", "-o", work.appendingPathComponent("q.bin").path, server.url("r.bin").absoluteString],
            in: work
        )
        #expect(quiet.status == 0 && quiet.stdout.isEmpty && quiet.stderr.isEmpty)
        #expect(try Data(contentsOf: work.appendingPathComponent("q.bin")) == data)

        // nginx's /redirect/ answers with one redirect.
        let redirected = server.url("redirect/r.bin").absoluteString
        let refused = try await haul(
            ["--max-redirects", "0", "-o", work.appendingPathComponent("no.bin").path, redirected],
            in: work
        )
        #expect(refused.status == 8)  // too many redirects: the transfer class
        #expect(
            refused.stderr.contains("curl error 47") && refused.stderr.contains("--max-redirects"),
            "\(refused.stderr)"
        )
        let followed = try await haul(
            ["--max-redirects", "1", "-o", work.appendingPathComponent("yes.bin").path, redirected],
            in: work
        )
        #expect(followed.status == 0, "\(followed.stderr)")
        #expect(try Data(contentsOf: work.appendingPathComponent("yes.bin")) == data)
    }

    @Test("--remote-time gives the file the server's Last-Modified; without it, the file has the time it was written")
    func remoteTime() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("t.bin", size: 300_000, seed: 22)
        // nginx's Last-Modified is the file's mtime: 2001-09-09 01:46:40 UTC.
        var times = [timeval(tv_sec: 1_000_000_000, tv_usec: 0), timeval(tv_sec: 1_000_000_000, tv_usec: 0)]
        #expect(utimes(server.root.appendingPathComponent("t.bin").path, &times) == 0)
        let url = server.url("t.bin").absoluteString
        let stamped = work.appendingPathComponent("stamped.bin").path
        #expect(try await haul(["--remote-time", "-o", stamped, url], in: work).status == 0)
        #expect(PlacedFile.at(stamped)?.modificationTime == 1_000_000_000)
        let plain = work.appendingPathComponent("plain.bin").path
        #expect(try await haul(["-o", plain, url], in: work).status == 0)
        #expect((PlacedFile.at(plain)?.modificationTime ?? 0) > Date().timeIntervalSince1970 - 600)
    }

    @Test("--revalidate asks whether a finished file changed: a 304 keeps it, a changed file is fetched again")
    func revalidate() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("v.bin", size: 200_000, seed: 23)
        let url = server.url("v.bin").absoluteString
        let output = work.appendingPathComponent("v.bin")
        #expect(try await haul(["-o", output.path, url], in: work).status == 0)
        let unchanged = try await haul(["--revalidate", "-o", output.path, url], in: work)
        #expect(unchanged.status == 0, "\(unchanged.stderr)")
        #expect(server.accessLog().filter { $0.uri == "/v.bin" }.map(\.status) == [200, 304])
        // The server's file changes (another size, so another ETag): the next revalidation fetches it.
        let changed = try server.makeFile("v.bin", size: 210_000, seed: 24)
        let refetched = try await haul(["--revalidate", "-o", output.path, url], in: work)
        #expect(refetched.status == 0, "\(refetched.stderr)")
        #expect(server.accessLog().filter { $0.uri == "/v.bin" }.map(\.status) == [200, 304, 200])
        #expect(try Data(contentsOf: output) == changed)
    }

    @Test("a finished file the user changed since is the user's: the same command downloads to f.bin.1 instead")
    func changedFileIsTheUsers() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let data = try server.makeFile("f.bin", size: 100_000, seed: 25)
        let output = work.appendingPathComponent("out")
        let arguments = ["-o", output.path + "/", server.url("f.bin").absoluteString]
        #expect(try await haul(arguments, in: work).status == 0)
        let file = output.appendingPathComponent("f.bin").path
        let placed = try #require(PlacedFile.at(file))
        // The user overwrites it with as many bytes of their own, later (as an editor would).
        let mine = Data(repeating: 0x61, count: 100_000)
        try mine.write(to: URL(fileURLWithPath: file))
        var times = [
            timeval(tv_sec: Int(placed.modificationTime) + 2, tv_usec: 0),
            timeval(tv_sec: Int(placed.modificationTime) + 2, tv_usec: 0),
        ]
        #expect(utimes(file, &times) == 0)
        let again = try await haul(arguments, in: work)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("-> \(output.path)/f.bin.1"), "\(again.stdout)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == mine)
        #expect(try Data(contentsOf: output.appendingPathComponent("f.bin.1")) == data)
        // Untouched, a finished file stays this download's: nothing is fetched a third time.
        let third = try await haul(arguments, in: work)
        #expect(third.stdout.contains("already complete"), "\(third.stdout)")
        #expect(server.accessLog().filter { $0.uri == "/f.bin" }.count == 2)
    }
}

extension HaulCLITests {
    /// A text file and its gzip beside it in nginx's root, as `gzip -k` leaves them: (text, gzip).
    func makeCompressedFile(_ server: NginxServer, _ name: String) async throws -> (Data, Data) {
        let text = Data((0..<20_000).map { "line \($0) of a compressible file\n" }.joined().utf8)
        let path = server.root.appendingPathComponent(name).path
        try text.write(to: URL(fileURLWithPath: path))
        #expect(try await ChildProcess("/usr/bin/gzip", ["-k", "-n", "-f", path]).exited() == 0)
        return (text, try Data(contentsOf: URL(fileURLWithPath: path + ".gz")))
    }

    @Test("a body gzipped without being asked is saved as sent, and said so; --compressed decodes it")
    func unrequestedCompression() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let (text, gzipped) = try await makeCompressedFile(server, "c.txt")
        #expect(gzipped.count < text.count / 4)
        let url = server.url("precompressed/c.txt").absoluteString

        let plain = work.appendingPathComponent("plain.txt")
        let asSent = try await haul(["-o", plain.path, url], in: work)
        #expect(asSent.status == 0, "\(asSent.stderr)")
        #expect(try Data(contentsOf: plain) == gzipped)
        #expect(
            asSent.stdout.contains("warning \(url): the server sent the body with Content-Encoding: gzip"),
            "\(asSent.stdout)"
        )
        #expect(asSent.stdout.contains("--compressed"))

        let json = try await haul(["--json", "-o", work.appendingPathComponent("j.txt").path, url], in: work)
        #expect(
            json.stdout.contains("\"code\":\"unrequestedContentEncoding\",\"encoding\":\"gzip\",\"event\":\"warning\"")
        )

        let decoded = work.appendingPathComponent("decoded.txt")
        let run = try await haul(["--compressed", "-o", decoded.path, url], in: work)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try Data(contentsOf: decoded) == text)
        #expect(!run.stdout.contains("warning"))
    }
}

extension HaulCLITests {
    @Test("a password in a URL reaches no line, JSON object or error that haul prints", arguments: [[], ["--json"]])
    func passwordIsNeverPrinted(mode: [String]) async throws {
        let (server, work) = try await startServerAndDirectory(
            own: "its URLs are written by hand, with a user, from the port"
        )
        defer { stop(server, work) }
        _ = try server.makeFile("p.bin", size: 20_000, seed: 27)
        let good = "http://user:s3cr3t-pw@127.0.0.1:\(server.port)/p.bin"
        let missing = "http://user:s3cr3t-pw@127.0.0.1:\(server.port)/missing.bin"
        let run = try await haul(mode + ["-o", work.appendingPathComponent("out").path + "/", good, missing], in: work)
        #expect(run.status == 2)  // the HTTP error class
        #expect(!run.stdout.contains("s3cr3t") && !run.stderr.contains("s3cr3t"), "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains("127.0.0.1:\(server.port)/p.bin"))
        #expect(Reporter.shown("http://a:b@h/x@y") == "http://h/x@y" && Reporter.shown("http://h/x") == "http://h/x")
        // Nor the disk: the journal (with its WAL) and everything under .haul/, which is private.
        let state = work.appendingPathComponent("out/.haul")
        var status = stat()
        #expect(stat(state.path, &status) == 0 && status.st_mode & 0o777 == 0o700)
        for name in try FileManager.default.contentsOfDirectory(atPath: state.path) {
            let file = state.appendingPathComponent(name)
            let bytes = try Data(contentsOf: file)
            #expect(bytes.range(of: Data("s3cr3t".utf8)) == nil, "\(name) holds the password")
            #expect(stat(file.path, &status) == 0 && status.st_mode & 0o077 == 0, "\(name) is readable by others")
        }
    }
}

extension HaulCLITests {
    @Test("--user-agent (-A) is the User-Agent of every request")
    func userAgentFlag() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("ua.bin", size: 5_000, seed: 28)
        let run = try await haul(
            [
                "-A", "Mozilla/5.0 (haul test)", "-o", work.appendingPathComponent("ua.bin").path,
                server.url("ua.bin").absoluteString,
            ],
            in: work
        )
        #expect(run.status == 0, "\(run.stderr)")
        #expect(server.accessLog().first { $0.uri == "/ua.bin" }?.userAgent == "Mozilla/5.0 (haul test)")
    }
}
