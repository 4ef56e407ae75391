import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 74, item 5, as a user meets it: the `.haul` folder deleted between two runs of one list.
extension HaulCLITests {
    @Test(
        "the state folder deleted, the list run again: each file checked with a 304 and kept (no .1); a changed one saved as .1 with the ways out named; --force replaces it"
    )
    func lostJournalRerun() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        var sources: [String: Data] = [:]
        for index in 0..<3 {
            sources["f\(index).bin"] = try server.makeFile("f\(index).bin", size: 150_000, seed: 760 + UInt64(index))
        }
        let output = work.appendingPathComponent("out")
        let list = work.appendingPathComponent("list.txt")
        try (0..<3).map { server.url("f\($0).bin").absoluteString + "\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        let arguments = ["-o", output.path + "/", "-i", list.path]
        let first = try await haul(arguments, in: work)
        #expect(first.status == 0, "\(first.stderr)")
        let state = output.appendingPathComponent(".haul")
        try FileManager.default.removeItem(at: state)
        let again = try await haul(arguments, in: work)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("3 completed (3 already complete)"), "\(again.stdout)")
        var names = try FileManager.default.contentsOfDirectory(atPath: output.path).filter { $0 != ".haul" }
        #expect(Set(names) == Set(sources.keys), "before: f0.bin.1, f1.bin.1, f2.bin.1: \(names.sorted())")
        #expect(server.accessLog().map(\.status) == [200, 200, 200, 304, 304, 304], "\(server.accessLog())")
        // f1 changes on the server; the state is lost again.
        let newer = try server.makeFile("f1.bin", size: 150_000, seed: 770)
        var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 0), timespec(tv_sec: 1_700_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, server.root.appendingPathComponent("f1.bin").path, &times, 0) == 0)
        try FileManager.default.removeItem(at: state)
        let changed = try await haul(arguments, in: work)
        #expect(changed.status == 0, "\(changed.stderr)")
        #expect(changed.stdout.contains("3 completed (2 already complete)"), "\(changed.stdout)")
        #expect(try Data(contentsOf: output.appendingPathComponent("f1.bin.1")) == newer)
        #expect(try Data(contentsOf: output.appendingPathComponent("f1.bin")) == sources["f1.bin"])
        #expect(
            changed.stderr.contains("was there already") && changed.stderr.contains("saved as 'f1.bin.1'")
                && changed.stderr.contains("-c") && changed.stderr.contains("--force"),
            "\(changed.stderr)"
        )
        // --force: the file at the name is replaced, no .1 made.
        try FileManager.default.removeItem(at: state)
        try FileManager.default.removeItem(at: output.appendingPathComponent("f1.bin.1"))
        let forced = try await haul(["--force"] + arguments, in: work)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try Data(contentsOf: output.appendingPathComponent("f1.bin")) == newer)
        names = try FileManager.default.contentsOfDirectory(atPath: output.path).filter { $0 != ".haul" }
        #expect(Set(names) == Set(sources.keys), "\(names.sorted())")
    }
}
