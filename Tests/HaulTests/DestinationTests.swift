import Foundation
import Glibc
import Testing

@testable import Haul

/// Issue 38, item 1 (its first step): what is at a destination. A symbolic link is followed (the
/// file is placed whole at its target, the link stays); a device, a FIFO or a socket is never replaced
/// by a file: the download is refused before anything is sent or created. Against nginx, with real
/// links, FIFOs and devices (`mknod`: the tests run as root, as CI does).
@Suite("Destinations that are not plain files")
struct DestinationTests {
    func lstatMode(_ path: String) -> mode_t? {
        var status = stat()
        return lstat(path, &status) == 0 ? status.st_mode & S_IFMT : nil
    }

    @Test(
        "a symlink is followed: the file is placed at its target (the user's old bytes replaced whole), the link stays"
    )
    func symlinkIsFollowed() async throws {
        let (server, directory) = try startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("linked.bin", size: 200_000, seed: 381)
        let folder = directory.appendingPathComponent("files")
        let elsewhere = directory.appendingPathComponent("elsewhere")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        let target = elsewhere.appendingPathComponent("target.bin")
        try Data("the user's old version".utf8).write(to: target)
        let link = folder.appendingPathComponent("link.bin")
        #expect(symlink("../elsewhere/target.bin", link.path) == 0)
        // A dangling link names the file to create.
        let dangling = folder.appendingPathComponent("dangling.bin")
        #expect(symlink("new.bin", dangling.path) == 0)
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            let placed = try await manager.download(from: server.url("linked.bin"), to: link).finished()
            #expect(placed.path == target.path)
            _ = try await manager.download(from: server.url("linked.bin"), to: dangling).finished()
        }
        #expect(lstatMode(link.path) == S_IFLNK && lstatMode(target.path) == S_IFREG)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link.path) == "../elsewhere/target.bin")
        #expect(try Data(contentsOf: target) == source)
        #expect(lstatMode(dangling.path) == S_IFLNK)
        #expect(try Data(contentsOf: folder.appendingPathComponent("new.bin")) == source)
        // The partial was beside the target (same file system: the rename is atomic), not the link.
        #expect(FileManager.default.fileExists(atPath: elsewhere.appendingPathComponent(".haul").path))
        // A loop of links fails clearly.
        let loop = folder.appendingPathComponent("loop.bin")
        #expect(symlink("loop.bin", loop.path) == 0)
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            #expect { _ = try manager.download(from: server.url("linked.bin"), to: loop) } throws: { error in
                (error as? DownloadError)?.errno == ELOOP
            }
        }
    }

    @Test(
        "a FIFO, a character device, a socket, and a link to one: refused, left as they were, nothing sent or created"
    )
    func specialFilesAreNeverReplaced() async throws {
        let (server, directory) = try startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("special.bin", size: 100_000, seed: 382)
        let folder = directory.appendingPathComponent("specials")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let fifo = folder.appendingPathComponent("pipe").path
        let device = folder.appendingPathComponent("null").path
        let socketPath = folder.appendingPathComponent("socket").path
        let link = folder.appendingPathComponent("to-null").path
        #expect(mkfifo(fifo, 0o644) == 0)
        // The same device as /dev/null (1, 3); made here so that nothing of the system's is at stake.
        try #require(mknod(device, S_IFCHR | 0o666, dev_t((1 << 8) | 3)) == 0, "mknod needs root, as CI runs")
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            _ = socketPath.utf8CString.withUnsafeBytes { raw.copyMemory(from: $0) }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0)
        #expect(symlink(device, link) == 0)
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            for (path, kind) in [
                (fifo, "FIFO"), (device, "character device"), (socketPath, "socket"), (link, "character device"),
            ] {
                #expect {
                    _ = try manager.download(from: server.url("special.bin"), to: URL(fileURLWithPath: path))
                } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .unsupportedDestination && error.description.contains(kind)
                        && error.description.contains("nothing was sent")
                }
            }
        }
        #expect(lstatMode(fifo) == S_IFIFO && lstatMode(device) == S_IFCHR && lstatMode(socketPath) == S_IFSOCK)
        #expect(lstatMode(link) == S_IFLNK)
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent(".haul").path))
        #expect(server.accessLog().filter { $0.uri == "/special.bin" }.isEmpty)
    }
}
