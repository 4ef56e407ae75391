import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 74, item 4: the kernel's rule for planted links and FIFOs, applied by Haul whatever
/// `fs.protected_symlinks` and `fs.protected_fifos` say (this machine has both off). In a folder that
/// is sticky and writable by all, a link or FIFO at the destination (or a link on the way to it) is
/// followed only when it is the user's own or the folder owner's. Tested as root against links and
/// FIFOs handed to another user (`nobody`, 65534) with `lchown`, as someone else would plant them.
extension DestinationTests {
    static let otherUser: uid_t = 65_534

    /// A folder like `/tmp` in `directory`: sticky, writable by all, owned by `owner`.
    static func sharedFolder(in directory: URL, owner: uid_t = 0) throws -> URL {
        let shared = directory.appendingPathComponent("shared")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: true)
        guard chmod(shared.path, 0o1777) == 0, chown(shared.path, owner, owner) == 0 else {
            throw TestFailure(
                "cannot make a shared folder: \(String(cString: strerror(errno))) (the tests run as root)"
            )
        }
        return shared
    }

    @Test(
        "another user's link in a sticky world-writable folder is not followed: the download fails saying why, the link's target untouched"
    )
    func plantedLinkIsRefused() async throws {
        try #require(geteuid() == 0, "plants another user's link with lchown: the tests run as root, as CI does")
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("planted.bin", size: 100_000, seed: 741)
        let shared = try Self.sharedFolder(in: directory)
        let victim = directory.appendingPathComponent("victim.conf")
        try Data("root's precious file".utf8).write(to: victim)
        let link = shared.appendingPathComponent("report.bin")
        #expect(symlink(victim.path, link.path) == 0 && lchown(link.path, Self.otherUser, Self.otherUser) == 0)
        // A link to a folder on the way to the destination, planted the same way.
        let folderLink = shared.appendingPathComponent("reports")
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("private"),
            withIntermediateDirectories: true
        )
        #expect(symlink(directory.appendingPathComponent("private").path, folderLink.path) == 0)
        #expect(lchown(folderLink.path, Self.otherUser, Self.otherUser) == 0)
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            for (destination, refused) in [(link, link), (folderLink.appendingPathComponent("r.bin"), folderLink)] {
                await #expect {
                    _ = try await manager.download(from: server.url("planted.bin"), to: destination).finished()
                } throws: { error in
                    let error = error as? DownloadError
                    return error?.code == .untrustedDestination && error?.path == refused.path
                        && "\(error!)".contains(
                            "owned by another user (uid 65534) in the shared folder '\(shared.path)'"
                        )
                        && error?.category == .localFiles
                }
            }
        }
        #expect(try Data(contentsOf: victim) == Data("root's precious file".utf8))
        #expect(lstatMode(link.path) == S_IFLNK)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("private").path)
                .isEmpty
        )
        #expect(server.accessLog().isEmpty, "nothing was asked for")
        // The user's own link there, and the folder owner's, are followed: the file is placed at the target.
        #expect(lchown(link.path, 0, 0) == 0)
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            _ = try await manager.download(from: server.url("planted.bin"), to: link).finished()
        }
        #expect(try Data(contentsOf: victim) == source)
        let ownersFolder = try Self.sharedFolder(in: directory.appendingPathComponent("theirs"), owner: Self.otherUser)
        let ownersLink = ownersFolder.appendingPathComponent("out.bin")
        let ownersTarget = directory.appendingPathComponent("owners-target.bin")
        #expect(symlink(ownersTarget.path, ownersLink.path) == 0)
        #expect(lchown(ownersLink.path, Self.otherUser, Self.otherUser) == 0)
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            _ = try await manager.download(from: server.url("planted.bin"), to: ownersLink).finished()
        }
        #expect(try Data(contentsOf: ownersTarget) == source)
    }

    @Test("another user's FIFO in a sticky world-writable folder is not written to; the user's own is")
    func plantedFIFOIsRefused() async throws {
        try #require(geteuid() == 0, "plants another user's FIFO with chown: the tests run as root, as CI does")
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("fifo.bin", size: 100_000, seed: 742)
        let shared = try Self.sharedFolder(in: directory)
        let fifo = shared.appendingPathComponent("pipe").path
        #expect(mkfifo(fifo, 0o666) == 0 && chown(fifo, Self.otherUser, Self.otherUser) == 0)
        // Its planter's reader waits: it must get nothing.
        let reader = StreamReader.fifo(fifo)
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            await #expect {
                _ = try await manager.download(from: server.url("fifo.bin"), to: URL(fileURLWithPath: fifo)).finished()
            } throws: { error in
                (error as? DownloadError)?.code == .untrustedDestination
                    && "\(error)".contains("a FIFO (named pipe) owned by another user (uid 65534)")
            }
        }
        // Lets the reader go: a writer that opens and closes (without waiting: had Haul written to
        // the FIFO, its reader would be gone, and a blocking open would wait for another forever).
        let writer = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        if writer >= 0 { close(writer) }
        #expect(await reader.everything().isEmpty)
        // The user's own FIFO in the same folder is written through.
        #expect(chown(fifo, 0, 0) == 0)
        let own = StreamReader.fifo(fifo)
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            _ = try await manager.download(from: server.url("fifo.bin"), to: URL(fileURLWithPath: fifo)).finished()
        }
        #expect(await own.everything() == source)
    }
}
