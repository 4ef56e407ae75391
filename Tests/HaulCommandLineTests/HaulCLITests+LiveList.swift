import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 41, item 3: `--list` during another process's run keeps up with what is on disk, not with
/// the last checkpoint of the download's row.
extension HaulCLITests {
    /// The length of the partial file in the state directory `state` (the first `.part` there), 0
    /// when there is none: how far another process's download has come.
    static func partialLength(in state: URL) -> Int64 {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: state.path)) ?? []
        return names.first { $0.hasSuffix(".part") }.map {
            FilePath.fileLength(state.appendingPathComponent($0).path) ?? 0
        } ?? 0
    }

    @Test(
        "a listing during another process's run shows the bytes the partial file holds, not the row's last checkpoint"
    )
    func listingKeepsUpWithThePartialFile() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        // Held by the server: /gated/ sends 1 MiB at once, then 1 KB/s (an 8 MiB file for hours), so
        // that the run is still going when the listing looks, however late it looks. (At /slow/'s
        // 512 KB/s, a loaded machine once listed it after the 16 s the whole file took.)
        let size = 8 * 1024 * 1024
        _ = try server.makeFile("live.bin", size: size)
        let output = work.appendingPathComponent("out")
        let state = output.appendingPathComponent(".haul")
        // A checkpoint a minute away: the row's bytes stay as the answer's acceptance wrote them.
        let running = try ChildProcess(
            Self.haulPath,
            [
                "--quiet", "--checkpoint-interval", "60", "-o", output.path + "/",
                server.url("gated/live.bin").absoluteString,
            ],
            stdout: work.appendingPathComponent("run.txt").path
        )
        defer { if running.isRunning { running.signal(SIGKILL) } }
        func partialLength() -> Int64 { Self.partialLength(in: state) }
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(20)
        while partialLength() < 600_000, clock.now < deadline, running.isRunning {
            try await Task.sleep(for: .milliseconds(20))
        }
        let before = partialLength()
        #expect(before >= 600_000)
        let entry = try await listedEntry(state, work: work)
        let after = partialLength()
        #expect(entry.state == "running")
        #expect(
            before <= entry.bytes && entry.bytes <= after,
            "listed \(entry.bytes), the partial held \(before) then \(after)"
        )
        #expect(entry.total == Int64(size))

        running.signal(SIGTERM)
        #expect(await running.exited() == 143)
    }

    /// Over several connections the partial file is as long as the whole file from the start (each
    /// segment is written at its offset): the listing shows the row's bytes, which each write brings
    /// up to date in its loop turn. Checked against the running process's own progress events, which
    /// count every byte received (written, or in one of its four buffers of 128 KiB).
    @Test(
        "a listing during another process's run over four connections keeps up with its progress, not its last checkpoint"
    )
    func listingKeepsUpOverSeveralConnections() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        // /held/: each of the four connections gets 1 MiB at once, then 1 KB/s: still running when
        // it is stopped, however busy the machine (not a rate chosen to be slow enough).
        let size = 48 * 1024 * 1024
        _ = try server.makeFile("live4.bin", size: size)
        let output = work.appendingPathComponent("out")
        let events = work.appendingPathComponent("events.jsonl").path
        let running = try ChildProcess(
            Self.haulPath,
            [
                "--json", "-x", "4", "--min-split-size", "1M", "--checkpoint-interval", "60", "-o", output.path + "/",
                server.url("held/live4.bin").absoluteString,
            ],
            stdout: events
        )
        defer { if running.isRunning { running.signal(SIGKILL) } }
        func received() -> Int64 {
            let lines = ((try? String(contentsOfFile: events, encoding: .utf8)) ?? "").split(separator: "\n")
            for line in lines.reversed() where line.contains("\"event\":\"progress\"") {
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                if let bytes = (object?["bytesReceived"] as? NSNumber)?.int64Value { return bytes }
            }
            return 0
        }
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(20)
        while received() < 2_000_000, clock.now < deadline, running.isRunning {
            try await Task.sleep(for: .milliseconds(20))
        }
        let progressed = received()
        #expect(progressed >= 2_000_000)
        let entry = try await listedEntry(output.appendingPathComponent(".haul"), work: work)
        #expect(entry.state == "running")
        #expect(entry.bytes >= progressed - 4 * 131_072, "listed \(entry.bytes), progress said \(progressed) before")
        #expect(entry.bytes <= Int64(size))

        running.signal(SIGTERM)
        #expect(await running.exited() == 143)
    }

    /// The one entry `haul --list --json` shows for `state`.
    private func listedEntry(_ state: URL, work: URL) async throws -> (state: String, bytes: Int64, total: Int64?) {
        let listed = try await haul(["--list", "--json", "--state", state.path], in: work)
        #expect(listed.status == 0, "\(listed.stderr)")
        let entry = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])
        return (
            entry["state"] as? String ?? "",
            (entry["bytesReceived"] as? NSNumber)?.int64Value ?? -1,
            (entry["totalBytes"] as? NSNumber)?.int64Value
        )
    }
}
