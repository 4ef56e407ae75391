import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// haul stopped by a signal or killed, again and again: every run continues what the last one left.
extension HaulCLITests {
    @Test("SIGINT pauses and exits 130; the same command again resumes and finishes")
    func interruptAndResume() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let size = 3 * 1024 * 1024
        let data = try server.makeFile("int.bin", size: size)
        let url = server.url("gated/int.bin").absoluteString
        let output = work.appendingPathComponent("out")
        let events = work.appendingPathComponent("events.jsonl").path

        // Started, and waited for (bounded) until haul reports bytes written; then interrupted.
        let first = try await startReceiving(["--json", "-o", output.path + "/", url], events: events)
        first.signal(SIGINT)
        #expect(await first.exited() == 130)
        let lines = try String(contentsOfFile: events, encoding: .utf8).split(separator: "\n")
        // The download's last event, then the run's summary.
        #expect(lines.dropLast().last?.contains("\"event\":\"paused\"") == true)
        #expect(lines.last?.contains("\"interrupted\":true") == true)
        #expect(!FileManager.default.fileExists(atPath: output.appendingPathComponent("int.bin").path))

        let listedBefore = try await haul(
            ["--list", "--json", "--state", output.appendingPathComponent(".haul").path],
            in: work
        )
        let entry = try #require(
            try JSONSerialization.jsonObject(with: Data(listedBefore.stdout.utf8)) as? [String: Any]
        )
        #expect(entry["state"] as? String == "interrupted")  // the next run continues it
        #expect((entry["bytesReceived"] as? Int ?? 0) > 0)
        #expect(entry["totalBytes"] as? Int == size)

        let second = try await haul(["-o", output.path + "/", url], in: work)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try Data(contentsOf: output.appendingPathComponent("int.bin")) == data)
        // Between the runs, --list shows the paused download from the journal.
        let listed = try await haul(["--list", "-o", output.path], in: work)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.hasPrefix("completed "))
        #expect(listed.stdout.contains(url))

        let requests = await server.requests(to: "/gated/int.bin", atLeast: 2)
        let resumed = requests.first { $0.range != "-" }
        #expect(resumed?.status == 206)
        #expect(requests.count == 2)
    }

    /// Waits (at most 20 s) until `ready` holds or `run` ends, then, a random moment of up to
    /// `milliseconds` later, SIGKILLs `run` if it still runs; returns whether it did. On a thread of
    /// its own: on the cooperative pool, which the rest of the suite may keep busy for seconds, a
    /// run once went on for 15 s (4 MB at 256 KB/s) before the test looked at it again.
    static func killWhen(
        _ run: ChildProcess,
        randomlyWithin milliseconds: Int,
        _ ready: @escaping @Sendable () -> Bool
    ) async -> Bool {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                let deadline = DispatchTime.now().uptimeNanoseconds + 20_000_000_000
                while DispatchTime.now().uptimeNanoseconds < deadline, run.isRunning, !ready() {
                    usleep(5_000)
                }
                usleep(useconds_t(Int.random(in: 0...milliseconds) * 1_000))
                guard run.isRunning else { return continuation.resume(returning: false) }
                run.signal(SIGKILL)
                continuation.resume(returning: true)
            }
            thread.start()
        }
    }

    /// Whether the journal in `state` holds a row with a validator, as committed (read by the
    /// `sqlite3` tool, read-only, beside the writing process).
    static func rowHasValidator(in state: URL) -> Bool {
        let journal = state.appendingPathComponent("journal.sqlite").path
        guard FileManager.default.fileExists(atPath: journal) else { return false }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [
            "-readonly", journal, "SELECT count(*) FROM downloads WHERE etag IS NOT NULL OR last_modified IS NOT NULL",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return process.terminationStatus == 0 && (Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 0
    }

    @Test("SIGKILL at random moments, five times: the file still ends byte-identical, re-sending little per kill")
    func killedRepeatedly() async throws {
        let (server, work) = try startFaultServerAndDirectory()
        defer { stop(server, work) }
        // The fault server's gate: each answer sends 256 KiB and holds the rest until the test opens
        // it, so no run can finish before it is killed, however late a loaded machine kills (before:
        // nginx at 256 KB/s, a rate chosen to be slow enough; 2 MiB once ran out before the fifth kill).
        let size = 4 * 1024 * 1024
        let bufferSize = 64 * 1024
        let data = FaultServer.body(size: size)
        let path = "/gate/\(256 * 1024)/\(size)"
        let url = server.url(String(path.dropFirst())).absoluteString
        let output = work.appendingPathComponent("out")
        let arguments = [
            "--json", "--buffer-size", "\(bufferSize)", "--checkpoint-interval", "0.05", "-o", output.path + "/", url,
        ]
        let partial = { @Sendable () -> Int64 in
            let state = output.appendingPathComponent(".haul")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: state.path)) ?? []
            return names.first { $0.hasSuffix(".part") }.flatMap {
                Self.fileSize(state.appendingPathComponent($0).path)
            } ?? 0
        }
        var kills = 0
        while kills < 5 {
            let before = partial()
            let events = work.appendingPathComponent("events-\(kills).jsonl").path
            let run = try ChildProcess(Self.haulPath, arguments, stdout: events)
            // Wait (bounded) until this run wrote something new, and its row (committed) holds the
            // answer's validator, then kill it a random moment later. (A kill between the partial's
            // first write and the turn's commit leaves a row without one: the next run rightly
            // starts over, and "only the first run starts from zero" would not hold. Seen once
            // at parallel width 4.)
            let killed = await Self.killWhen(run, randomlyWithin: 150) {
                partial() > before && Self.rowHasValidator(in: output.appendingPathComponent(".haul"))
            }
            guard killed else { break }
            #expect(await run.exited() == 128 + SIGKILL)
            kills += 1
        }
        #expect(kills == 5, "the download finished before it could be killed five times")
        // Killed runs never paused: only the periodic checkpoints can have synced bytes.
        let journal = try Journal(directory: output.appendingPathComponent(".haul").path)
        let record = try #require(try journal.allRecords().first?.1)
        #expect(record.bytesSynced > 0)
        #expect(record.bytesSynced <= partial())
        journal.close()
        server.openGate()
        let last = try await haul(["-o", output.path + "/", url], in: work)
        #expect(last.status == 0, "\(last.stderr)")
        #expect(try Data(contentsOf: output.appendingPathComponent(String(size))) == data)

        let requests = server.requests(to: path)
        #expect(requests.count == kills + 1)
        let sent = Int64(requests.reduce(0) { $0 + $1.bytesSent })
        // Each kill loses at most the unwritten buffer plus what was in flight: the 256 KiB the gate
        // lets through and the socket buffers.
        let perKill = Int64(bufferSize + 512 * 1024)
        #expect(sent <= Int64(size) + Int64(kills) * perKill, "sent \(sent) for \(size) bytes and \(kills) kills")
        // Only the first run starts from zero; every later one resumes with a range.
        #expect(requests.filter { $0.range == nil }.count == 1)
        #expect(requests.filter { $0.range?.hasPrefix("bytes=") == true }.count == requests.count - 1)
        print("haul kill test: \(kills) kills, \(sent - Int64(size)) bytes re-sent in all")
    }

    @Test("-x 4, SIGKILLed at random moments five times: byte-identical, each segment resumed from its own bytes")
    func killedRepeatedlyWithSegments() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        // At /crawl/ each request gets 256 KiB at once, then 64 KB/s: five runs of four connections
        // fetch a few MiB of the 24, however late a loaded machine kills them; the last run says
        // `X-Speed: fast` and gets the rest at once.
        let size = 24 * 1024 * 1024
        let bufferSize = 64 * 1024
        let connections = 4
        let data = try server.makeFile("segments.bin", size: size, seed: 21)
        let url = server.url("crawl/segments.bin").absoluteString
        let output = work.appendingPathComponent("out")
        let arguments = [
            "--json", "-x", "\(connections)", "--min-split-size", "1M", "--buffer-size", "\(bufferSize)",
            "--checkpoint-interval", "0.05", "-o", output.path + "/", url,
        ]
        var kills = 0
        var most = 0
        while kills < 5 {
            let events = work.appendingPathComponent("events-\(kills).jsonl")
            let run = try ChildProcess(Self.haulPath, arguments, stdout: events.path)
            // Wait (bounded) until this run reported progress (the first run: over all its
            // connections, which a loaded machine may open after a first report), then kill it a
            // random moment later.
            let first = kills == 0
            let killed = await Self.killWhen(run, randomlyWithin: 300) {
                let text = (try? String(contentsOf: events, encoding: .utf8)) ?? ""
                return text.contains("\"event\":\"progress\"")
                    && (!first || text.contains("\"connections\":\(connections)"))
            }
            guard killed else { break }
            #expect(await run.exited() == 128 + SIGKILL)
            kills += 1
            let text = (try? String(contentsOf: events, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    let count = object["connections"] as? Int
                else { continue }
                most = max(most, count)
            }
        }
        #expect(kills == 5, "the download finished before it could be killed five times")
        #expect(most == connections, "the runs reported at most \(most) connections")
        // The journal holds the map: several segments, each with its own bytes.
        let journal = try Journal(directory: output.appendingPathComponent(".haul").path)
        let record = try #require(try journal.allRecords().first?.1)
        let map = try #require(record.segments.flatMap { SegmentMap(encoded: $0, total: Int64(size)) })
        #expect(map.segments.count >= connections)
        #expect(map.segments.filter { $0.written > 0 }.count >= 2)
        #expect(record.bytesCommitted == map.bytesWritten)
        journal.close()
        let last = try await haul(
            ["-x", "\(connections)", "--min-split-size", "1M", "-H", "X-Speed: fast", "-o", output.path + "/", url],
            in: work
        )
        #expect(last.status == 0, "\(last.stderr)")
        #expect(try Data(contentsOf: output.appendingPathComponent("segments.bin")) == data)

        let requests = await server.requests(to: "/crawl/segments.bin", atLeast: kills * 2)
        let sent = requests.reduce(0) { $0 + $1.bytesSent }
        // Each kill loses, per live connection, at most its unwritten buffer (the journal records
        // each segment's bytes as they reach the file) plus what was in flight: nginx's first 256 KiB
        // of each answer and the socket buffers.
        let perKill = Int64(connections) * Int64(bufferSize + 1024 * 1024 + 512 * 1024)
        #expect(sent <= Int64(size) + Int64(kills) * perKill, "sent \(sent) for \(size) bytes and \(kills) kills")
        // Only the first run's first request starts from zero; every other asks for a range, pinned.
        #expect(requests.filter { $0.range == "-" }.count == 1)
        #expect(requests.filter { $0.range != "-" }.allSatisfy { $0.ifRange != "-" })
        print(
            "haul -x \(connections) kill test: \(kills) kills, \(sent - Int64(size)) bytes re-sent in all, \(requests.count) requests"
        )
    }

    @Test(
        "haul loads FoundationEssentials, not the whole of Foundation with ICU (5.5 MB of RSS; HaulPostgres once pulled it in)"
    )
    func linksFoundationEssentialsOnly() async throws {
        let work = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let listing = work.appendingPathComponent("ldd.txt")
        let ldd = try ChildProcess("/usr/bin/ldd", [Self.haulPath], stdout: listing.path)
        #expect(await ldd.exited() == 0)
        let libraries = try String(contentsOf: listing, encoding: .utf8).split(separator: "\n").compactMap {
            $0.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.map(String.init)
        }
        #expect(libraries.contains("libFoundationEssentials.so"))
        #expect(libraries.contains("libcurl.so.4"))
        let whole = libraries.filter { ["libFoundation.so", "lib_FoundationICU.so"].contains($0) }
        #expect(whole.isEmpty, "haul loads \(whole)")
    }

    static func fileSize(_ path: String) -> Int64? {
        var status = stat()
        return stat(path, &status) == 0 ? Int64(status.st_size) : nil
    }
}
