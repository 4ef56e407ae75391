import Foundation
import Glibc
import Testing

@testable import Haul

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
        while clock.now < deadline, process.isRunning {
            let text = (try? String(contentsOfFile: events, encoding: .utf8)) ?? ""
            if text.contains("\"event\":\"progress\"") { return process }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("haul reported no progress")
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
        let (server, work) = try startServerAndDirectory()
        defer { stop(server, work) }
        // 1 MiB at once, then 16 KB/s: the last 48 KiB take about three seconds.
        let data = try server.makeFile("bg.bin", size: 1024 * 1024 + 48 * 1024)
        let output = work.appendingPathComponent("out")
        let events = work.appendingPathComponent("bg.jsonl").path
        let process = try await startReceiving(
            ["--json", "-o", output.path + "/", server.url("gated/bg.bin").absoluteString],
            events: events,
            ignoringSIGINT: true
        )
        process.signal(SIGINT)
        #expect(await process.exited() == 0)
        #expect(try Data(contentsOf: output.appendingPathComponent("bg.bin")) == data)
        let text = try String(contentsOfFile: events, encoding: .utf8)
        #expect(!text.contains("\"event\":\"paused\""))
    }

    @Test(
        "SIGHUP pauses like SIGTERM: bytes kept, exit 129; the summary counts the bytes received, and the next run only the rest"
    )
    func hangUpPausesAndCountsAreHonest() async throws {
        let (server, work) = try startServerAndDirectory()
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
        #expect(lines.last?.contains("\"event\":\"paused\"") == true)
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
