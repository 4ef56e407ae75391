import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 38, item 1: what is at a destination. A symbolic link is followed (the file is placed whole
/// at its target, the link stays); a character device, a FIFO or a socket is written through, in
/// order, and never replaced by a file; a stream resumes within its run and never splices. Against
/// nginx and the fault server, with real links, FIFOs, sockets and devices (`mknod`: the tests run
/// as root, as CI does).
@Suite("Destinations that are not plain files")
struct DestinationTests {
    /// A FIFO in `directory`, and its reader (started now: it waits for the download to open it).
    static func fifoWithReader(in directory: URL) throws -> (String, StreamReader) {
        let fifo = directory.appendingPathComponent("pipe").path
        guard mkfifo(fifo, 0o644) == 0 else { throw TestFailure("mkfifo: \(String(cString: strerror(errno)))") }
        return (fifo, StreamReader.fifo(fifo))
    }

    func lstatMode(_ path: String) -> mode_t? {
        var status = stat()
        return lstat(path, &status) == 0 ? status.st_mode & S_IFMT : nil
    }

    @Test(
        "a symlink is followed: the file is placed at its target (the user's old bytes replaced whole), the link stays"
    )
    func symlinkIsFollowed() async throws {
        let (server, directory) = try await startServerAndDirectory()
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
        "a FIFO, a character device, a Unix socket, and a link to the device: written through in order, left as they were"
    )
    func specialFilesAreWrittenThrough() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("special.bin", size: 3_000_000, seed: 382)
        let folder = directory.appendingPathComponent("specials")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let fifo = folder.appendingPathComponent("pipe").path
        let device = folder.appendingPathComponent("null").path
        let socketPath = folder.appendingPathComponent("socket").path
        let link = folder.appendingPathComponent("to-null").path
        #expect(mkfifo(fifo, 0o644) == 0)
        // The same device as /dev/null (1, 3); made here so that nothing of the system's is at stake.
        try #require(mknod(device, S_IFCHR | 0o666, dev_t((1 << 8) | 3)) == 0, "mknod needs root, as CI runs")
        #expect(symlink(device, link) == 0)
        let url = server.url("special.bin")
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            // A reader slower than the network (4 KiB, then 0.2 ms): the pipe fills, the transfer waits.
            let reader = StreamReader.fifo(fifo, chunk: 4096, pause: 200)
            let piped = try manager.download(from: url, to: URL(fileURLWithPath: fifo))
            #expect(try await piped.finished().path == fifo)
            #expect(await reader.everything() == source)
            let socketReader = try StreamReader.unixSocket(socketPath)
            _ = try await manager.download(from: url, to: URL(fileURLWithPath: socketPath)).finished()
            #expect(await socketReader.everything() == source)
            for path in [device, link] {
                let written = try manager.download(from: url, to: URL(fileURLWithPath: path))
                _ = try await written.finished()
                #expect(written.progress.bytesReceived == Int64(source.count))
            }
        }
        #expect(lstatMode(fifo) == S_IFIFO && lstatMode(device) == S_IFCHR && lstatMode(socketPath) == S_IFSOCK)
        #expect(lstatMode(link) == S_IFLNK)
        // Nothing beside them: a stream's row lives in a folder of the manager's own, removed at its end.
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == [
                "null", "pipe", "socket", "to-null",
            ]
        )
        #expect(
            server.accessLog().filter { $0.uri == "/special.bin" }.map(\.bytesSent)
                == Array(repeating: Int64(source.count), count: 4)
        )
    }

    @Test(
        "a stream resumes within its run: a connection dropped every 100 KB, and the reader gets every byte once, in order"
    )
    func streamResumesWithinTheRun() async throws {
        try await withFaultServer { server, directory in
            let (fifo, reader) = try Self.fifoWithReader(in: directory)
            let faults = FaultTests()
            try await withDownloadManager(configuration: faults.patient(directory)) { manager in
                _ = try await manager.download(from: server.url("drop/100000/400000"), to: URL(fileURLWithPath: fifo))
                    .finished()
            }
            #expect(await reader.everything() == FaultServer.body(size: 400_000))
            let requests = server.requests(to: "/drop/100000/400000")
            #expect(requests.map(\.range) == [nil, "bytes=100000-", "bytes=200000-", "bytes=300000-"])
            #expect(requests.dropFirst().allSatisfy { $0.ifRange == "\"v1-400000\"" })
        }
    }

    @Test(
        "a file that changes mid-stream: the stream ends with a clear error; what was written is a prefix, never a splice"
    )
    func streamNeverSplices() async throws {
        try await withFaultServer { server, directory in
            let (fifo, reader) = try Self.fifoWithReader(in: directory)
            let faults = FaultTests()
            try await withDownloadManager(configuration: faults.patient(directory)) { manager in
                let download = try manager.download(
                    from: server.url("changing/100000/300000"),
                    to: URL(fileURLWithPath: fifo)
                )
                await #expect { _ = try await download.finished() } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .streamCannotRestart
                        && error.description.contains("100000 bytes already written")
                }
            }
            #expect(await reader.everything() == FaultServer.body(size: 300_000, version: 1).prefix(100_000))
            // A checksum cannot be checked on a stream: refused before anything is sent, and before
            // the FIFO is opened (which would wait for a reader).
            let checksum = try #require(Checksum("sha256:" + String(repeating: "0", count: 64)))
            let other = directory.appendingPathComponent("other-pipe").path
            #expect(mkfifo(other, 0o644) == 0)
            try await withDownloadManager(configuration: faults.patient(directory)) { manager in
                #expect {
                    _ = try manager.download(
                        DownloadRequest(
                            url: server.url("file/1000"),
                            destination: URL(fileURLWithPath: other),
                            checksum: checksum
                        )
                    )
                } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .unsupportedDestination && error.description.contains("a FIFO (named pipe)")
                        && error.description.contains("checksum")
                        && error.description.contains("nothing there was changed")
                }
            }
            #expect(lstatMode(other) == S_IFIFO)
            #expect(server.requests(to: "/file/1000").isEmpty)
        }
    }

    @Test(
        "a stream interrupted by shutdown leaves no row for a later manager: a stream resumes within its process only"
    )
    func streamRowEndsWithItsProcess() async throws {
        try await withFaultServer { server, directory in
            let fifo = directory.appendingPathComponent("pipe").path
            #expect(mkfifo(fifo, 0o644) == 0)
            // A reader that takes a byte a second: the pipe fills, and the transfer waits for it.
            let reader = StreamReader.fifo(fifo, chunk: 1, pause: 1_000_000)
            let configuration = FaultTests().patient(directory)
            let id = try await withDownloadManager(configuration: configuration) { manager in
                let download = try manager.download(from: server.url("file/4000000"), to: URL(fileURLWithPath: fifo))
                var events = download.events.makeAsyncIterator()
                await events.next { if case .receiving = $0 { true } else { false } }
                return download.id
            }
            let rows = try DownloadManager.journalEntries(stateDirectory: try #require(configuration.stateDirectory))
            #expect(!rows.contains { $0.id == id }, "\(rows)")
            _ = reader
        }
    }

    @Test("a block device is refused; a FIFO made at the destination during a download is not replaced by the file")
    func blockDevicesAndLateArrivals() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        // /gated/ sends 1 MiB at once, then 1 KB/s (the last 256 KiB would take minutes); a resume (with
        // Range) is not limited: the pause below lands before the end, however loaded the machine.
        _ = try server.makeFile("late.bin", size: 1024 * 1024 + 256 * 1024, seed: 383)
        let block = directory.appendingPathComponent("block").path
        try #require(mknod(block, S_IFBLK | 0o600, dev_t((7 << 8) | 200)) == 0, "mknod needs root, as CI runs")
        let destination = directory.appendingPathComponent("late.bin")
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            #expect {
                _ = try manager.download(from: server.url("late.bin"), to: URL(fileURLWithPath: block))
            } throws: { error in
                guard let error = error as? DownloadError else { return false }
                return error.code == .unsupportedDestination && error.description.contains("a block device")
            }
            let download = try manager.download(from: server.url("gated/late.bin"), to: destination)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
            await download.pause()
            await events.next { if case .paused = $0 { true } else { false } }
            // Someone makes a FIFO where the file is to go, before the last bytes arrive.
            #expect(mkfifo(destination.path, 0o644) == 0)
            await download.resume()
            await #expect { _ = try await download.finished() } throws: { error in
                guard let error = error as? DownloadError else { return false }
                return error.code == .unsupportedDestination && error.description.contains("never replaces")
            }
        }
        #expect(lstatMode(block) == S_IFBLK && lstatMode(destination.path) == S_IFIFO)
    }

    @Test(
        "partials are their owner's only (0600) in a private state folder (made 0700 if it was not); the file placed gets 0666 less the umask"
    )
    func modesOfPartialsAndPlacedFiles() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("mode.bin", size: 1024 * 1024 + 256 * 1024, seed: 384)
        let state = directory.appendingPathComponent(".haul")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        #expect(chmod(state.path, 0o755) == 0)  // an older one, readable by others
        let destination = directory.appendingPathComponent("mode.bin")
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        try await withDownloadManager(configuration: configuration) { manager in
            // /gated/: 1 MiB at once, then 1 KB/s: paused with a partial on disk.
            let download = try manager.download(from: server.url("gated/mode.bin"), to: destination)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
            await download.pause()
            await events.next { if case .paused = $0 { true } else { false } }
            var status = stat()
            #expect(stat(state.path, &status) == 0 && status.st_mode & 0o777 == 0o700)
            let partial = state.appendingPathComponent("\(download.id).part").path
            #expect(stat(partial, &status) == 0 && status.st_mode & 0o777 == 0o600)
            await download.resume()
            _ = try await download.finished()
        }
        #expect(try Data(contentsOf: destination) == source)
        // The umask this process (and so the manager) runs with, as a child shell reports it.
        let report = directory.appendingPathComponent("umask.txt").path
        #expect(await (try ChildProcess("/bin/sh", ["-c", "umask"], stdout: report)).exited() == 0)
        let mask = try #require(
            mode_t(
                try String(contentsOfFile: report, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
                radix: 8
            )
        )
        var status = stat()
        #expect(
            stat(destination.path, &status) == 0 && status.st_mode & 0o777 == 0o666 & ~mask,
            "\(String(status.st_mode & 0o777, radix: 8))"
        )
    }
}

extension DestinationTests {
    @Test("a FIFO replaced by a link to another file before it is opened: refused, the other file untouched")
    func replacedFIFORefused() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = directory.appendingPathComponent("pipe").path
        #expect(mkfifo(fifo, 0o644) == 0)
        var status = stat()
        #expect(stat(fifo, &status) == 0)
        // What a download looked at (a FIFO) is gone when it opens it: a link to a file stands there.
        let victim = directory.appendingPathComponent("victim.txt")
        try Data("keep".utf8).write(to: victim)
        #expect(unlink(fifo) == 0 && symlink(victim.path, fifo) == 0)
        #expect {
            _ = try StreamTarget.open(path: fifo, status: status, inherited: nil, url: "http://h/x", stopped: { false })
        } throws: { error in
            (error as? HaulValues.DownloadError)?.code == .unsupportedDestination
                && "\(error)".contains("no longer what it was")
        }
        #expect(try Data(contentsOf: victim) == Data("keep".utf8))
    }
}
