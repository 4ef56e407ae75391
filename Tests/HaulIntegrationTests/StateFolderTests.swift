import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 39, items 2 and 3: what others put in a state folder. A link, a FIFO, a device or a second
/// name in place of a partial file, the journal's `-wal`, or the `.haul` folder itself is refused
/// with `unsafeFile` and left as it is: nothing is written through it, nothing hangs. A destination
/// inside a state folder is refused before anything is sent.
@Suite("What others put in a state folder", .timeLimit(.minutes(1)))
struct StateFolderTests {
    func configuration(_ directory: URL) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.retryLimit = 0
        configuration.connectionRetryLimit = 0
        return configuration
    }

    func lstatMode(_ path: String) -> mode_t? {
        var status = stat()
        return lstat(path, &status) == 0 ? status.st_mode & S_IFMT : nil
    }

    enum Planted: String, CaseIterable, CustomTestStringConvertible {
        case linkToVictim, fifo, linkToDevZero, hardLinkToVictim, otherUsersFile
        var testDescription: String { rawValue }
    }

    @Test(
        "a link, a FIFO, /dev/zero, a hard link or another user's file in place of a partial is refused, left alone, never written through",
        arguments: Planted.allCases
    )
    func plantedPartial(_ planted: Planted) async throws {
        try await withFaultServer { server, directory in
            let destination = directory.appendingPathComponent("d.bin")
            let victim = directory.appendingPathComponent("victim")
            let victimBytes = Data("someone else's file, 0644".utf8)
            try victimBytes.write(to: victim)
            chmod(victim.path, 0o644)
            let url = server.url("drop/50000/400000")
            // A first run keeps 50,000 bytes in the partial file, and its row.
            try await withDownloadManager(configuration: configuration(directory)) { manager in
                await #expect(throws: DownloadError.self) {
                    try await manager.download(from: url, to: destination).finished()
                }
            }
            let partial = directory.appendingPathComponent("state/\(DownloadID(destination: destination)).part").path
            #expect(FilePath.fileLength(partial) == 50_000)
            unlink(partial)
            switch planted {
            case .linkToVictim: #expect(symlink(victim.path, partial) == 0)
            case .fifo: #expect(mkfifo(partial, 0o600) == 0)
            case .linkToDevZero: #expect(symlink("/dev/zero", partial) == 0)
            case .hardLinkToVictim: #expect(link(victim.path, partial) == 0)
            case .otherUsersFile:
                #expect(FileManager.default.createFile(atPath: partial, contents: Data(count: 50_000)))
                #expect(chown(partial, 65534, 65534) == 0)
            }
            let before = lstatMode(partial)
            try await withDownloadManager(configuration: configuration(directory)) { manager in
                await #expect {
                    try await manager.download(from: server.url("file/400000"), to: destination).finished()
                } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .unsafeFile && error.path == partial
                        && error.description.contains("Haul wrote nothing through it")
                }
            }
            #expect(try Data(contentsOf: victim) == victimBytes)
            var status = stat()
            #expect(stat(victim.path, &status) == 0 && status.st_mode & 0o777 == 0o644)
            #expect(lstatMode(partial) == before)
            #expect(lstatMode(destination.path) == nil)
        }
    }

    @Test("a .haul that is a link, or another user's folder, is refused before anything is written in it")
    func plantedStateFolder() async throws {
        try await withFaultServer { server, directory in
            let elsewhere = directory.appendingPathComponent("elsewhere")
            try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
            let files = directory.appendingPathComponent("files")
            try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
            #expect(symlink(elsewhere.path, files.appendingPathComponent(".haul").path) == 0)
            try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
                // The journal cannot be opened: the handle fails, as for any failure to open one.
                let download = try manager.download(
                    from: server.url("file/1000"),
                    to: files.appendingPathComponent("a")
                )
                await #expect { try await download.finished() } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .unsafeFile && error.path == files.appendingPathComponent(".haul").path
                        && error.description.contains("a symbolic link, not a folder")
                }
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
            // Another user's folder: that user could plant anything in it.
            let shared = directory.appendingPathComponent("shared")
            try FileManager.default.createDirectory(
                at: shared.appendingPathComponent(".haul"),
                withIntermediateDirectories: true
            )
            #expect(chown(shared.appendingPathComponent(".haul").path, 65534, 65534) == 0)
            try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
                let download = try manager.download(
                    from: server.url("file/1000"),
                    to: shared.appendingPathComponent("a")
                )
                await #expect { try await download.finished() } throws: { error in
                    (error as? DownloadError)?.code == .unsafeFile
                }
            }
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: shared.appendingPathComponent(".haul").path).isEmpty
            )
            // A link the caller names as the state directory is the caller's choice: followed.
            let linked = directory.appendingPathComponent("linked-state")
            #expect(symlink(elsewhere.path, linked.path) == 0)
            var configuration = DownloadManager.Configuration()
            configuration.stateDirectory = linked
            try await withDownloadManager(configuration: configuration) { manager in
                _ = try await manager.download(from: server.url("file/1000"), to: files.appendingPathComponent("b"))
                    .finished()
            }
            #expect(FileManager.default.fileExists(atPath: elsewhere.appendingPathComponent("journal.sqlite").path))
        }
    }

    @Test("a state folder that is another user's by the time a partial is opened is not written in")
    func folderChangedHands() async throws {
        try await withFaultServer { server, directory in
            let destination = directory.appendingPathComponent("d.bin")
            let state = directory.appendingPathComponent("state")
            try await withDownloadManager(configuration: configuration(directory)) { manager in
                // The journal is open (its folder was this user's); then the folder changes hands, as a
                // folder swapped in under the same path would.
                _ = try await manager.download(from: server.url("file/1000"), to: directory.appendingPathComponent("a"))
                    .finished()
                #expect(chown(state.path, 65534, 65534) == 0)
                await #expect {
                    try await manager.download(from: server.url("file/400000"), to: destination).finished()
                } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .unsafeFile && error.path == state.path
                        && error.description.contains("a folder of user 65534")
                }
                #expect(chown(state.path, geteuid(), getegid()) == 0)
            }
            #expect(!FileManager.default.fileExists(atPath: destination.path))
        }
    }

    @Test("links at journal.sqlite-wal and -shm are refused: their targets keep their modes and bytes")
    func plantedJournalFiles() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = directory.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        for suffix in ["-wal", "-shm"] {
            let victim = directory.appendingPathComponent("victim\(suffix)")
            try Data("keep".utf8).write(to: victim)
            chmod(victim.path, 0o644)
            let planted = state.appendingPathComponent("journal.sqlite\(suffix)").path
            #expect(symlink(victim.path, planted) == 0)
            var configuration = DownloadManager.Configuration()
            configuration.stateDirectory = state
            #expect { _ = try DownloadManager(configuration: configuration) } throws: { error in
                guard let error = error as? DownloadError else { return false }
                return error.code == .unsafeFile && error.path == planted
            }
            var status = stat()
            #expect(stat(victim.path, &status) == 0 && status.st_mode & 0o777 == 0o644)
            #expect(try Data(contentsOf: victim) == Data("keep".utf8))
            unlink(planted)
        }
        // A FIFO as the journal: neither a manager nor a listing waits on it.
        let fifo = state.appendingPathComponent("journal.sqlite").path
        unlink(fifo)
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect { _ = try DownloadManager.journalEntries(stateDirectory: state) } throws: { error in
            (error as? DownloadError)?.code == .unsafeFile
        }
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        #expect { _ = try DownloadManager(configuration: configuration) } throws: { error in
            (error as? DownloadError)?.code == .unsafeFile
        }
        #expect(lstatMode(fifo) == S_IFIFO)
    }

    @Test(
        "a destination inside a state folder (.haul/journal.sqlite, the configured one) is refused; the journal stays whole"
    )
    func destinationInStateFolder() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
                let first = directory.appendingPathComponent("first")
                _ = try await manager.download(from: server.url("file/1000"), to: first).finished()
                for path in [".haul/journal.sqlite", ".haul/sub/x", "a/.haul/b"] {
                    #expect {
                        _ = try manager.download(
                            from: server.url("file/1000"),
                            to: directory.appendingPathComponent(path)
                        )
                    } throws: { error in
                        guard let error = error as? DownloadError else { return false }
                        return error.code == .unsupportedDestination
                            && error.description.contains("inside the state directory")
                    }
                }
            }
            let entries = try DownloadManager.journalEntries(stateDirectory: directory.appendingPathComponent(".haul"))
            #expect(entries.map(\.state) == [.completed])
            var configuration = DownloadManager.Configuration()
            configuration.stateDirectory = directory.appendingPathComponent("state")
            try await withDownloadManager(configuration: configuration) { manager in
                #expect {
                    _ = try manager.download(
                        from: server.url("file/1000"),
                        to: directory.appendingPathComponent("state/journal.sqlite")
                    )
                } throws: { error in
                    (error as? DownloadError)?.code == .unsupportedDestination
                }
            }
        }
    }
}

/// Issue 56, item 2: a state folder planted as a link is refused when it is named `.haul` (where a
/// default state folder is looked for, by the library or `haul -o DIR/`), whoever made it, and when
/// another user made it, whatever its name; a dangling one makes nothing where it leads.
extension StateFolderTests {
    enum PlantedState: String, CaseIterable, CustomTestStringConvertible {
        /// `.haul`, a link of the running user's own: still not followed.
        case ownDotHaul
        /// `.haul` and `state`, links another user (`nobody`) made in a shared folder.
        case othersDotHaul, othersNamed
        /// `.haul`, another user's link to a folder that does not exist yet.
        case othersDangling
        var testDescription: String { rawValue }
    }

    @Test(
        "a state directory named as a planted link: refused before anything is made or written",
        arguments: PlantedState.allCases
    )
    func plantedStateLink(_ planted: PlantedState) async throws {
        try await withFaultServer { server, directory in
            // A shared folder (sticky, anyone writes) and a folder of the running user's, which
            // the link leads to.
            let shared = directory.appendingPathComponent("shared")
            try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: true)
            #expect(chmod(shared.path, 0o1777) == 0)
            let target = directory.appendingPathComponent(planted == .othersDangling ? "never" : "mine")
            if planted != .othersDangling {
                try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
                #expect(chmod(target.path, 0o755) == 0)
            }
            let link = shared.appendingPathComponent(planted == .othersNamed ? "state" : ".haul")
            #expect(symlink(target.path, link.path) == 0)
            if planted != .ownDotHaul { #expect(lchown(link.path, 65534, 65534) == 0) }
            var configuration = DownloadManager.Configuration()
            configuration.stateDirectory = link
            #expect {
                try DownloadManager(configuration: configuration)
            } throws: { error in
                guard let error = error as? DownloadError else { return false }
                let owner = planted == .ownDotHaul ? "a symbolic link," : "a symbolic link of user 65534"
                return error.code == .unsafeFile && error.path == link.path && error.description.contains(owner)
            }
            // The default state folder of a destination in the shared folder: the same.
            if planted != .othersNamed {
                try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
                    let download = try manager.download(
                        from: server.url("file/1000"),
                        to: shared.appendingPathComponent("a")
                    )
                    await #expect { try await download.finished() } throws: { error in
                        (error as? DownloadError)?.code == .unsafeFile
                    }
                }
                #expect(!FileManager.default.fileExists(atPath: shared.appendingPathComponent("a").path))
            }
            // Before: the folder became 0700 and got the journal; a dangling link's target was made.
            if planted == .othersDangling {
                #expect(lstatMode(target.path) == nil)
            } else {
                #expect(try FileManager.default.contentsOfDirectory(atPath: target.path).isEmpty)
                var status = stat()
                #expect(stat(target.path, &status) == 0 && status.st_mode & 0o777 == 0o755)
            }
            #expect(lstatMode(link.path) == S_IFLNK)
        }
    }
}
