import Foundation
import Glibc
import Testing

@testable import HaulValues

/// The shared-folder rule over many paths of one call (``SharedFolderRule/refusal(for:user:folders:)``):
/// a folder walked once is not walked again, and every path gets the answer it gets alone. Run as
/// root, as CI runs: another user's links and FIFOs are planted with `lchown`.
@Suite("Shared-folder rule, many paths at once")
struct SharedFolderRuleTests {
    static let otherUser: uid_t = 65_534

    @Test("each path's answer is the one it gets alone; a folder refused on the way is never remembered")
    func sameAnswersAsAlone() throws {
        try #require(geteuid() == 0, "plants another user's link with lchown: the tests run as root, as CI does")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("haul-rule-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let shared = directory.appendingPathComponent("shared").path
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        #expect(chmod(shared, 0o1777) == 0)
        let own = directory.appendingPathComponent("own").path
        try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
        // Another user's link to a file, to a folder, and a FIFO, planted in the shared folder.
        #expect(symlink("/etc/hostname", shared + "/planted.bin") == 0)
        #expect(lchown(shared + "/planted.bin", Self.otherUser, Self.otherUser) == 0)
        #expect(symlink(own, shared + "/reports") == 0)
        #expect(lchown(shared + "/reports", Self.otherUser, Self.otherUser) == 0)
        #expect(mkfifo(shared + "/pipe", 0o666) == 0 && chown(shared + "/pipe", Self.otherUser, Self.otherUser) == 0)
        // The user's own link to a folder there is followed.
        #expect(symlink(own, shared + "/mine") == 0)
        let paths = [
            shared + "/a.bin", shared + "/planted.bin", shared + "/b.bin", shared + "/reports/r.bin",
            shared + "/reports/s.bin", shared + "/pipe", shared + "/mine/m.bin", shared + "/mine/n.bin",
            shared + "/mine/../planted.bin", shared + "/missing/x.bin", own + "/o.bin",
        ]
        let refused: Set<String> = [
            shared + "/planted.bin", shared + "/reports/r.bin", shared + "/reports/s.bin", shared + "/pipe",
        ]
        // (`mine/..` is the parent of the link's target, as the kernel resolves it: no planted.bin there.)
        var folders = SharedFolderRule.KnownFolders()
        for path in paths + paths {
            let alone = SharedFolderRule.refusal(for: path)
            let together = SharedFolderRule.refusal(for: path, folders: &folders)
            #expect(together == alone, "\(path)")
            #expect((together != nil) == refused.contains(path), "\(path)")
            // The entry the walk handed back, where it reached the last one, is what lstat finds there.
            var status = stat()
            let found = lstat(path, &status) == 0
            switch folders.leaf {
            case nil: #expect(path.contains("/missing/") || together != nil, "\(path)")
            case (let leafPath, .found(let entry))?:
                #expect(leafPath == path && found && entry.st_ino == status.st_ino, "\(path)")
                #expect(entry.st_mode & S_IFMT == status.st_mode & S_IFMT, "\(path): not followed")
            case (let leafPath, .missing)?: #expect(leafPath == path && !found, "\(path)")
            }
        }
        // Walked once: the shared folder, the user's own link (where it led), their own folder; never
        // the folder behind another user's link, nor one that does not exist.
        #expect(folders.resolved[shared] == shared)
        #expect(folders.resolved[shared + "/mine"] == own)
        #expect(folders.resolved[shared + "/reports"] == nil && folders.resolved[shared + "/missing"] == nil)
        // A link planted after its folder was walked is refused all the same: the last entry is
        // always looked at.
        #expect(symlink("/etc/hostname", shared + "/late.bin") == 0)
        #expect(lchown(shared + "/late.bin", Self.otherUser, Self.otherUser) == 0)
        #expect(SharedFolderRule.refusal(for: shared + "/late.bin", folders: &folders)?.path == shared + "/late.bin")
    }
}
