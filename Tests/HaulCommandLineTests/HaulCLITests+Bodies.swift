import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 42, item 5: `-o -` through a connection that drops, and `--discard` for load tests.
extension HaulCLITests {
    /// Runs `haul OPTIONS -o - URL | sha256sum` through a shell, as a user types it (the state in a
    /// folder of its own, --state), for the fault server's `path` serving `size` bytes: its exit
    /// status, whether the digest printed is the body's, and what haul said.
    func pipedDigest(
        _ path: String,
        size: Int,
        options: String = "",
        server: FaultServer,
        work: URL
    ) async throws -> (status: Int32, matches: Bool, said: String) {
        let digest = work.appendingPathComponent("digest.txt").path
        let messages = work.appendingPathComponent("messages.txt").path
        let command =
            "'\(Self.haulPath)' --state '\(work.path)/state' --retries 5 \(options) -o - "
            + "'\(server.url(path).absoluteString)' | sha256sum"
        let process = try ChildProcess("/bin/sh", ["-c", command], stdout: digest, stderr: messages)
        let status = await process.exited()
        let source = work.appendingPathComponent("source.bin")
        try FaultServer.body(size: size).write(to: source)
        let expected = try HaulValues.Checksum.digest(ofFileAt: source.path, algorithm: .sha256)
        let printed = try String(contentsOfFile: digest, encoding: .utf8)
        let said = try String(contentsOfFile: messages, encoding: .utf8)
        return (status, printed.hasPrefix(expected), "\(printed) \(said)")
    }

    @Test("haul -o - URL | sha256sum is right through a server that drops the connection every 300 KB")
    func standardOutputThroughDrops() async throws {
        try await withFaultServer { server, work in
            let path = "drop/300000/1000000"
            let run = try await pipedDigest(path, size: 1_000_000, server: server, work: work)
            #expect(run.status == 0 && run.matches, "\(run.said)")
            let said = run.said
            let requests = server.requests(to: "/\(path)")
            #expect(requests.map(\.range) == [nil, "bytes=300000-", "bytes=600000-", "bytes=900000-"], "\(said)")
        }
    }

    @Test("haul -o - URL | sha256sum is right through a server that drops once, then ignores Range")
    func standardOutputThroughIgnoredRange() async throws {
        try await withFaultServer { server, work in
            let run = try await pipedDigest("norange-drop/300000/1000000", size: 1_000_000, server: server, work: work)
            #expect(run.status == 0 && run.matches, "\(run.said)")
            // Said while the answer's first bytes are read past, since the progress stands still.
            #expect(run.said.contains("its first 300000 bytes, already received, are read past"), "\(run.said)")
        }
    }

    @Test("haul -o - URL | sha256sum of a file that changes under a resume: exit 8, naming standard output, not a FIFO")
    func standardOutputOfChangedFile() async throws {
        try await withFaultServer { server, work in
            let run = try await pipedDigest("changing/100000/300000", size: 300_000, server: server, work: work)
            #expect(run.status == 0 && !run.matches, "\(run.said)")  // the pipe's status is sha256sum's
            #expect(run.said.contains("the remote file changed; the 100000 bytes already written to standard output"))
            #expect(!run.said.contains("FIFO"), "\(run.said)")
        }
    }

    @Test("--json: a file whose resume the server answers whole reads past its bytes, saying so in a warning line")
    func readPastWarningInJSON() async throws {
        try await withFaultServer { server, work in
            let path = "norange-drop/300000/1000000"
            let file = work.appendingPathComponent("out.bin")
            let run = try await haul(
                ["--json", "--retries", "5", "-o", file.path, server.url(path).absoluteString],
                in: work
            )
            #expect(run.status == 0, "\(run.stderr)")
            #expect(try Data(contentsOf: file) == FaultServer.body(size: 1_000_000))
            let warnings = run.stdout.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }.filter { $0["event"] as? String == "warning" }
            #expect(warnings.count == 1, "\(run.stdout)")
            #expect(warnings.first?["code"] as? String == "repeatedBytesReadPast")
            #expect(
                warnings.first?["bytes"] as? Int == 300_000
                    && warnings.first?["reasonCode"] as? String == "rangeIgnored"
            )
            #expect(!run.stdout.contains("\"restarted\""), "\(run.stdout)")
        }
    }

    @Test(
        "haul --resume-unvalidated -o - through drops from a server with no validator: right; without it, a clear failure"
    )
    func standardOutputWithoutValidator() async throws {
        try await withFaultServer { server, work in
            let size = 1_000_000
            let path = "plain-drop/300000/\(size)"
            let run = try await pipedDigest(
                path,
                size: size,
                options: "--resume-unvalidated",
                server: server,
                work: work
            )
            #expect(run.status == 0 && run.matches, "\(run.said)")
            #expect(server.requests(to: "/\(path)").count >= 4, "\(run.said)")
            let messages = work.appendingPathComponent("messages.txt").path
            // Without the option: the first drop ends it, naming the option; the output got a prefix.
            let written = work.appendingPathComponent("written.bin")
            let plain = try ChildProcess(
                Self.haulPath,
                ["--state", "\(work.path)/state2", "-o", "-", server.url(path).absoluteString],
                stdout: written.path,
                stderr: messages
            )
            #expect(await plain.exited() == 8)  // the transfer failed midway
            let refusal = try String(contentsOfFile: messages, encoding: .utf8)
            #expect(refusal.contains("--resume-unvalidated"), "\(refusal)")
            #expect(try Data(contentsOf: written) == FaultServer.body(size: size).prefix(300_000))
        }
    }

    @Test("-o - stopped at --max-time: the summary says that another run starts the stream over, not resumes it")
    func standardOutputStoppedSaysItStartsOver() async throws {
        try await withFaultServer { server, work in
            let written = work.appendingPathComponent("written.bin")
            let messages = work.appendingPathComponent("messages.txt")
            let process = try ChildProcess(
                Self.haulPath,
                [
                    "--state", "\(work.path)/state", "--max-time", "0.5", "--limit-rate", "200K", "-o", "-",
                    server.url("file/4000000").absoluteString,
                ],
                stdout: written.path,
                stderr: messages.path
            )
            #expect(await process.exited() == 28)
            let said = try String(contentsOf: messages, encoding: .utf8)
            #expect(said.contains("stopped at --max-time") && said.contains("not resumed by another run"), "\(said)")
            #expect(!said.contains("run the same command again to resume"))
            let body = try Data(contentsOf: written)
            #expect(
                !body.isEmpty && body.count < 4_000_000 && body == FaultServer.body(size: 4_000_000).prefix(body.count)
            )
        }
    }

    @Test(
        "-o - whose reader goes away, -o /dev/full (at once, not retried): exit 7 naming the cause, advising to download again"
    )
    func writeThroughFailures() async throws {
        try await withFaultServer { server, work in
            let url = server.url("file/4000000").absoluteString
            let head = work.appendingPathComponent("head.bin")
            let messages = work.appendingPathComponent("messages.txt")
            // The status of haul, not of head: the shell's last status is head's.
            let command =
                "'\(Self.haulPath)' --state '\(work.path)/state' -o - '\(url)' 2>'\(messages.path)' "
                + "| { head -c 1000 > '\(head.path)'; }; exit ${PIPESTATUS[0]}"
            let piped = try ChildProcess("/bin/bash", ["-c", command], stdout: "/dev/null", stderr: "/dev/null")
            #expect(await piped.exited() == 7)
            #expect(try Data(contentsOf: head) == FaultServer.body(size: 4_000_000).prefix(1000))
            let said = try String(contentsOf: messages, encoding: .utf8)
            #expect(said.contains("Broken pipe") && said.contains("went away"), "\(said)")
            #expect(said.contains("Download again with a reader that takes the whole body") && !said.contains("resume"))
            let full = try ChildProcess(
                Self.haulPath,
                ["--state", "\(work.path)/state", "-o", "/dev/full", url],
                stdout: "/dev/null",
                stderr: messages.path
            )
            #expect(await full.exited() == 7)
            let fullSaid = try String(contentsOf: messages, encoding: .utf8)
            #expect(fullSaid.contains("'/dev/full': No space left on device"), "\(fullSaid)")
            #expect(fullSaid.contains("then download again") && !fullSaid.contains("then resume"), "\(fullSaid)")
            // A device that is full stays so: not retried as a full disk is (whose space may be freed).
            #expect(!fullSaid.contains("retrying"), "\(fullSaid)")
        }
    }

    @Test("standard streams closed: -o - refused (64); a file through drops whole, the messages going nowhere")
    func closedStandardStreams() async throws {
        try await withFaultServer { server, work in
            let url = server.url("drop/300000/1000000").absoluteString
            let messages = work.appendingPathComponent("messages.txt").path
            let command = "'\(Self.haulPath)' --state '\(work.path)/state' -o - '\(url)' >&-"
            let refused = try ChildProcess("/bin/sh", ["-c", command], stdout: "/dev/null", stderr: messages)
            #expect(await refused.exited() == 64)
            let said = try String(contentsOfFile: messages, encoding: .utf8)
            #expect(said.contains("standard output is closed"), "\(said)")
            // Its retries' messages have no stream to go to, and must not reach a file of its own.
            let file = work.appendingPathComponent("out.bin").path
            let closed =
                "'\(Self.haulPath)' --state '\(work.path)/state' --retries 5 -o '\(file)' '\(url)' <&- >&- 2>&-"
            let run = try ChildProcess("/bin/sh", ["-c", closed], stdout: "/dev/null", stderr: "/dev/null")
            #expect(await run.exited() == 0)
            #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == FaultServer.body(size: 1_000_000))
        }
    }

    @Test("--discard --json: every body read and thrown away, each line with its timings, nothing written")
    func discardWithTimings() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let sizes = [200_000, 1_000, 3_000_000]
        for (index, size) in sizes.enumerated() { try server.makeFile("d\(index).bin", size: size) }
        let urls = sizes.indices.map { server.url("d\($0).bin").absoluteString }
        let before = try FileManager.default.contentsOfDirectory(atPath: FileManager.default.currentDirectoryPath)
        // The first URL twice: two downloads (a load test fetches one URL many times).
        let run = try await haul(["--discard", "--json", "-j", "2"] + urls + [urls[0]], in: work)
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let completed = lines.filter { $0["event"] as? String == "completed" }
        #expect(completed.count == 4, "\(run.stdout)")
        for line in completed {
            let url = try #require(line["url"] as? String)
            let size = sizes[try #require(urls.firstIndex(of: url))]
            #expect(line["path"] as? String == "/dev/null")
            #expect(line["received"] as? Int == size && line["size"] as? Int == size)
            let timings = try #require(line["timings"] as? [String: Any], "\(line)")
            let firstByte = try #require(timings["timeToFirstByte"] as? Double)
            let total = try #require(timings["total"] as? Double)
            #expect(firstByte > 0 && firstByte <= total)
            #expect(timings["attempts"] as? Int == 1)
            let opened = try #require(timings["connectionsOpened"] as? Int)
            let reused = try #require(timings["connectionsReused"] as? Int)
            #expect(opened + reused == 1)
        }
        // -j 2 and four downloads: at least two went over a connection left open.
        let reused = completed.compactMap { ($0["timings"] as? [String: Any])?["connectionsReused"] as? Int }
        #expect(reused.reduce(0, +) >= 2)
        let summary = try #require(lines.last)
        #expect(
            summary["event"] as? String == "summary" && summary["received"] as? Int == sizes.reduce(0, +) + sizes[0]
        )
        // Nothing was made where haul ran, nor beside the files' names.
        #expect(try FileManager.default.contentsOfDirectory(atPath: FileManager.default.currentDirectoryPath) == before)
        #expect(server.accessLog().filter { $0.uri == "/d0.bin" }.count == 2)
        // --discard writes nothing, so -o and --checksum make no sense with it.
        let refused = try await haul(["--discard", "-o", work.appendingPathComponent("x").path, urls[0]], in: work)
        #expect(refused.status == 64 && refused.stderr.contains("--discard writes nothing"), "\(refused.stderr)")
    }
}
