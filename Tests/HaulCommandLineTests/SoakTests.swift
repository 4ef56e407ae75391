import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport

/// Issue 56: the audit's soak in a short form. 2,000 files through a relay that resets, cuts,
/// stalls or trickles half of its connections, with `haul` SIGKILLed ten times on the way: every
/// file ends whole and the server's, none twice, nothing left behind. `scripts/test.sh` runs it
/// alone (a thousand connections and ten processes would starve the other suites' timing).
@Suite("Soak: faults and kills over 2,000 files", .timeLimit(.minutes(3)))
struct SoakTests {
    @Test(
        "2,000 files through a fault relay, haul SIGKILLed ten times: each file whole, none named .1, little sent twice"
    )
    func faultsAndKills() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let relay = try FaultRelay.start(to: server.port, seed: 56)
        defer { relay.stop() }
        let count = 2_000
        var sizes: [Int] = []
        for index in 0..<count {
            let size = 4_096 + (index * 7_919) % 28_672  // 4-32 KiB, 8 per folder of 250
            sizes.append(size)
            _ = try server.makeFile("s\(index).bin", size: size, seed: UInt64(56_000 + index))
        }
        let list = work.appendingPathComponent("list.txt")
        try (0..<count).map {
            "\(relay.url(server.placed("s\($0).bin")).absoluteString)\n  out=d\($0 % 8)/s\($0).bin\n"
        }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        let output = work.appendingPathComponent("out")
        let arguments = [
            "--json", "-j", "32", "--stall-timeout", "1", "--retries", "30", "-o", output.path, "-i", list.path,
        ]
        // Each run is killed once 10 more files are in place (a random moment after): what a run
        // reports on standard output comes in batches, the folders say it at once.
        let placed = { @Sendable () -> Int in
            (0..<8).reduce(0) { sum, folder in
                let path = output.appendingPathComponent("d\(folder)").path
                return sum + ((try? FileManager.default.contentsOfDirectory(atPath: path).count) ?? 0)
            }
        }
        var kills = 0
        for run in 0..<10 {
            let events = work.appendingPathComponent("events-\(run).jsonl").path
            let before = placed()
            let process = try ChildProcess(HaulCLITests.haulPath, arguments, stdout: events)
            let killed = await HaulCLITests.killWhen(process, randomlyWithin: 20) { placed() >= before + 10 }
            let status = await process.exited()
            guard killed else {
                #expect(status == 0, "run \(run) ended by itself with \(status)")
                break
            }
            #expect(status == 128 + SIGKILL)
            kills += 1
        }
        #expect(kills == 10, "the list was done before the tenth kill")
        let last = try ChildProcess(
            HaulCLITests.haulPath,
            arguments,
            stdout: work.appendingPathComponent("events-last.jsonl").path
        )
        #expect(await last.exited() == 0)
        // Every file whole and the server's, at its name; nothing beside it.
        var differing: [(index: Int, got: Data, source: Data)] = []
        for index in 0..<count {
            let got = try Data(contentsOf: output.appendingPathComponent("d\(index % 8)/s\(index).bin"))
            let source = try server.root.appendingPathComponent("s\(index).bin").contentsData()
            if got != source { differing.append((index, got, source)) }
        }
        if !differing.isEmpty {
            // Where each differs, and what the server and the journal saw of it: a failure says
            // enough to be followed without running the soak again; the run's folder is kept.
            let log = server.accessLog()
            let entries = try DownloadManager.journalEntries(stateDirectory: output.appendingPathComponent(".haul"))
            for (index, got, source) in differing {
                let differs =
                    zip(got, source).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                    ?? min(got.count, source.count)
                let requests = log.filter { $0.uri == "/s\(index).bin" }
                    .map { "\($0.status) \($0.range) sent \($0.bytesSent)" }
                let entry = entries.first { $0.destination.hasSuffix("/d\(index % 8)/s\(index).bin") }
                Issue.record(
                    "s\(index).bin: \(got.count) bytes for \(source.count), first difference at \(differs); requests \(requests); row \(String(describing: entry))"
                )
            }
            let kept = URL(fileURLWithPath: "/tmp/haul-soak-\(getpid())")
            try? FileManager.default.removeItem(at: kept)
            try? FileManager.default.copyItem(at: work, to: kept)
        }
        for folder in 0..<8 {
            let names = try FileManager.default.contentsOfDirectory(
                atPath: output.appendingPathComponent("d\(folder)").path
            )
            #expect(names.count == count / 8, "d\(folder): \(names.filter { !$0.hasSuffix(".bin") })")
        }
        let state = output.appendingPathComponent(".haul")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasSuffix(".part") }.isEmpty
        )
        let entries = try DownloadManager.journalEntries(stateDirectory: state)
        #expect(entries.count == count && entries.allSatisfy { $0.state == .completed })
        // What the server sent: each file once, and what faults and kills cost on top.
        let total = sizes.reduce(0, +)
        let sent = server.accessLog().reduce(Int64(0)) { $0 + $1.bytesSent }
        let faults = relay.faults
        let faulty = faults.filter { $0.key != .none }.values.reduce(0, +)
        #expect(faulty >= 50, "\(faults)")
        #expect(sent < Int64(total) * 2, "sent \(sent) for \(total)")
        print(
            "haul soak: \(count) files, \(kills) kills, faults \(faults.map { "\($0.key): \($0.value)" }.sorted()), "
                + "sent \(sent) for \(total) bytes (\(String(format: "%.2f", Double(sent) / Double(total)))x)"
        )
    }
}

extension URL {
    /// The file's bytes (a test's read of a source file).
    fileprivate func contentsData() throws -> Data { try Data(contentsOf: self) }
}
