import Foundation
import Glibc
import Testing

@testable import Haul

/// Issue 56, item 4: a process killed after a finished file was moved into place and before its
/// row said so. The next run finds that file (the journal recorded which one, by device and inode,
/// before the move): completed, not fetched again, no `name.1` beside it.
extension HaulCLITests {
    @Test(
        "killed between a file's rename and its row's commit (a failpoint): the rerun fetches it not again, names nothing .1"
    )
    func killBetweenRenameAndCommit() async throws {
        let (server, work) = try startServerAndDirectory()
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
