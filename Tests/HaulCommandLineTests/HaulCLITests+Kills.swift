import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 56, item 4: a process killed after a finished file was moved into place and before its
/// row said so. The next run finds that file (the journal recorded which one, by device and inode,
/// before the move): completed, not fetched again, no `name.1` beside it.
extension HaulCLITests {
    @Test(
        "killed between a file's rename and its row's commit (a failpoint): the rerun fetches it not again, names nothing .1"
    )
    func killBetweenRenameAndCommit() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        var sources: [String: Data] = [:]
        for index in 0..<40 {
            sources["k\(index).bin"] = try server.makeFile("k\(index).bin", size: 64 * 1024, seed: UInt64(5600 + index))
        }
        let list = work.appendingPathComponent("list.txt")
        try (0..<40).map { server.url("k\($0).bin").absoluteString + "\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        let output = work.appendingPathComponent("out")
        // The 10th file placed: the process dies as with SIGKILL, its row not yet completed.
        let killed = try await haul(
            ["-q", "-j", "8", "-o", output.path + "/", "-i", list.path],
            in: work,
            environment: ["HAUL_FAILPOINT": "placed:10"]
        )
        #expect(killed.status == 128 + SIGKILL, "\(killed.stderr)")
        let line = try #require(killed.stderr.split(separator: "\n").first { $0.hasPrefix("haul failpoint placed: ") })
        let placed = String(line.dropFirst("haul failpoint placed: ".count))
        let name = FilePath.lastComponent(of: placed)
        #expect(try Data(contentsOf: URL(fileURLWithPath: placed)) == sources[name])
        let before = try DownloadManager.journalEntries(stateDirectory: output.appendingPathComponent(".haul"))
        #expect(before.first { $0.destination == placed }?.state != .completed)
        let rerun = try await haul(["-q", "-j", "8", "-o", output.path + "/", "-i", list.path], in: work)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        // Every file once, whole; before: 8-92 of 3,000 came again as name.1 beside their twins.
        let names = try FileManager.default.contentsOfDirectory(atPath: output.path).filter { $0 != ".haul" }
        #expect(Set(names) == Set(sources.keys), "\(names.sorted())")
        for (file, source) in sources {
            #expect(try Data(contentsOf: output.appendingPathComponent(file)) == source, "\(file)")
        }
        // The file placed at the kill was asked for once, by the killed run.
        #expect(server.accessLog().filter { $0.uri == "/\(name)" }.count == 1)
        let after = try DownloadManager.journalEntries(stateDirectory: output.appendingPathComponent(".haul"))
        #expect(after.count == 40 && after.allSatisfy { $0.state == .completed && $0.destinationHoldsPlacedFile })
    }
}

/// Issue 56, item 5: a journal lost or damaged is not "everything again". Its message leads to
/// `-c`, which proves each file already at its name by its length and last bytes and keeps it; a
/// partial whose row is gone is continued when its download is asked for again (proven by its
/// overlap) and removed at the end of that run when it is not.
extension HaulCLITests {
    @Test(
        "a damaged journal moved away as its message says, then -c: nothing fetched whole again, no .1, orphans continued or removed"
    )
    func damagedJournalThenContinue() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        var sources: [String: Data] = [:]
        for index in 0..<10 {
            sources["l\(index).bin"] = try server.makeFile("l\(index).bin", size: 200_000, seed: UInt64(5650 + index))
        }
        let list = work.appendingPathComponent("list.txt")
        try (0..<10).map { server.url("l\($0).bin").absoluteString + "\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        let output = work.appendingPathComponent("out")
        let state = output.appendingPathComponent(".haul")
        let arguments = ["-q", "-o", output.path + "/", "-i", list.path]
        #expect(try await haul(arguments, in: work).status == 0)
        let journal = state.appendingPathComponent("journal.sqlite")
        try Data("not a journal".utf8).write(to: journal)
        let damaged = try await haul(arguments, in: work)
        #expect(
            damaged.status == 7 && damaged.stderr.contains("ask for the downloads again with -c: each file"),
            "\(damaged.stderr)"
        )
        // Moved away, as advised; a partial of l3 left (its file gone), and one of a download the
        // list no longer has.
        for suffix in ["", "-wal", "-shm"] { unlink(journal.path + suffix) }
        let l3 = output.appendingPathComponent("l3.bin")
        try FileManager.default.removeItem(at: l3)
        let partial = state.appendingPathComponent("\(DownloadID(destination: l3)).part")
        try sources["l3.bin"]!.prefix(100_000).write(to: partial)
        let stray = state.appendingPathComponent(
            "\(DownloadID(destination: output.appendingPathComponent("gone.bin"))).part"
        )
        try Data(repeating: 7, count: 5000).write(to: stray)
        let served = server.accessLog().count
        let rerun = try await haul(["-c"] + arguments, in: work)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        // Before: every file again as name.1, and the partials left for good.
        let names = try FileManager.default.contentsOfDirectory(atPath: output.path).filter { $0 != ".haul" }
        #expect(Set(names) == Set(sources.keys), "\(names.sorted())")
        for (name, source) in sources {
            #expect(try Data(contentsOf: output.appendingPathComponent(name)) == source, "\(name)")
        }
        // Each file there was proven by a range of its last bytes (at most 64 KiB sent); l3's
        // partial was continued from its overlap.
        let asked = Array(server.accessLog().dropFirst(served))
        #expect(asked.count == 10 && asked.allSatisfy { $0.status == 206 }, "\(asked)")
        #expect(asked.filter { $0.uri != "/l3.bin" }.allSatisfy { $0.bytesSent <= 64 * 1024 }, "\(asked)")
        let continued = try #require(asked.first { $0.uri == "/l3.bin" })
        #expect(continued.range.hasPrefix("bytes=") && continued.bytesSent <= 200_000 - 100_000 + 64 * 1024)
        #expect(!FileManager.default.fileExists(atPath: partial.path))
        #expect(!FileManager.default.fileExists(atPath: stray.path))
    }
}
