import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 56, item 3, at placement: a name someone else wrote is placed through the folders under
/// its output folder opened one by one, so a link planted after the name was checked (between the
/// check and the move) is not followed; the user's own links inside the folder still are.
@Suite("Placing a name others wrote", .timeLimit(.minutes(1)))
struct ConfinedPlacementTests {
    /// A partial file of `bytes` in `state` and the job that places it at `root/relative`.
    func job(_ root: URL, _ relative: String, state: URL, bytes: Data) throws -> FinishJob {
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let partial = state.appendingPathComponent("p.part")
        try bytes.write(to: partial)
        #expect(chmod(partial.path, 0o600) == 0)
        var job = FinishJob(
            id: HaulValues.DownloadID(rawValue: "p"),
            partialPath: partial.path,
            destination: root.appendingPathComponent(relative).path,
            remainder: nil,
            writeWhole: false,
            keepDestination: false,
            expectedSize: nil,
            expectedChecksum: nil,
            url: "http://h/p.bin"
        )
        job.confinedTo = root.path
        return job
    }

    @Test("a folder link another user planted after the check: refused, nothing written where it leads")
    func plantedAfterTheCheck() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let root = directory.appendingPathComponent("shared")
        let elsewhere = directory.appendingPathComponent("elsewhere")
        for folder in [root, elsewhere] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        #expect(chmod(root.path, 0o1777) == 0)
        let bytes = Data("the file".utf8)
        let job = try job(root, "sub/x.bin", state: directory.appendingPathComponent("state"), bytes: bytes)
        // Planted once the name was checked (nothing was there then), before the file is placed.
        #expect(symlink(elsewhere.path, root.appendingPathComponent("sub").path) == 0)
        #expect(lchown(root.appendingPathComponent("sub").path, 65534, 65534) == 0)
        guard case .failure(let error) = job.perform() else {
            Issue.record("placed through another user's link")
            return
        }
        #expect(error.code == .unsupportedDestination && error.description.contains("user 65534"), "\(error)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
        // (Before: `rename` followed the link and put the file in `elsewhere`.)
    }

    @Test("missing folders are made under the output folder; the user's own link inside is followed, one out is not")
    func ownLinksAndMissingFolders() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let root = directory.appendingPathComponent("out")
        let inner = root.appendingPathComponent("inner")
        let outside = directory.appendingPathComponent("outside")
        for folder in [inner, outside] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        #expect(symlink(inner.path, root.appendingPathComponent("mine").path) == 0)
        #expect(symlink(outside.path, root.appendingPathComponent("out-link").path) == 0)
        let state = directory.appendingPathComponent("state")
        let made = try job(root, "a/b/c.bin", state: state, bytes: Data("c".utf8))
        guard case .success(let placed) = made.perform() else {
            Issue.record("not placed in folders made under the output folder")
            return
        }
        #expect(placed.path == nil)
        #expect(try Data(contentsOf: root.appendingPathComponent("a/b/c.bin")) == Data("c".utf8))
        let own = try job(root, "mine/d.bin", state: state, bytes: Data("d".utf8))
        guard case .success = own.perform() else {
            Issue.record("not placed through the user's own link inside the folder")
            return
        }
        #expect(try Data(contentsOf: inner.appendingPathComponent("d.bin")) == Data("d".utf8))
        let out = try job(root, "out-link/e.bin", state: state, bytes: Data("e".utf8))
        guard case .failure(let error) = out.perform() else {
            Issue.record("placed out of the folder through a link")
            return
        }
        #expect(error.code == .unsupportedDestination && error.description.contains("leads out"), "\(error)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty)
    }
}
