import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 74, item 5: a lost journal is not a lost download. A finished file carries the URL and
/// version it was placed as (``FileOrigin``, extended attributes); asked for again with no row (the
/// state folder deleted, or damaged and moved away), it is checked against the server with a
/// conditional request and kept when the server still has that version.
@Suite("A lost journal")
struct LostJournalTests {
    func attribute(_ name: String, of path: String) -> String? { FileOrigin.attribute(name, at: path) }

    @Test("a finished file records its URL (no query, no password) and its version on itself")
    func fileRecordsItsOrigin() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("o.bin", size: 120_000, seed: 751)
        let destination = directory.appendingPathComponent("o.bin")
        var url = URLComponents(url: server.url("o.bin"), resolvingAgainstBaseURL: false)!
        url.user = "alice"
        url.password = "hunter2"
        url.query = "sig=SECRET"
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            _ = try await manager.download(from: url.url!, to: destination).finished()
        }
        #expect(attribute(FileOrigin.urlAttribute, of: destination.path) == server.url("o.bin").absoluteString)
        let version = try #require(attribute(FileOrigin.versionAttribute, of: destination.path))
        #expect(
            version.hasPrefix("v1\nurl-sha256=") && version.contains("\netag=\"") && version.contains("\nlength=120000")
        )
        for secret in ["hunter2", "alice", "SECRET"] {
            #expect(
                !version.contains(secret)
                    && attribute(FileOrigin.urlAttribute, of: destination.path)?.contains(secret) == false
            )
        }

        // The public question a program that names files itself asks: this URL's file, whole and
        // unchanged; not another URL's; not once it is edited, even to the same length.
        let shown = DownloadRequest.redacted(url.url!)
        #expect(!shown.contains("hunter2") && shown.hasSuffix("o.bin?sig=SECRET"))
        #expect(DownloadManager.isPlacedFile(at: destination.path, from: shown))
        #expect(!DownloadManager.isPlacedFile(at: destination.path, from: server.url("o.bin").absoluteString))
        #expect(!DownloadManager.isPlacedFile(at: directory.appendingPathComponent("none").path, from: shown))
        let handle = try FileHandle(forWritingTo: destination)
        try handle.write(contentsOf: Data([0x41]))
        try handle.close()
        // The edit's time set apart from the recorded one: the kernel's file times tick coarsely
        // (a jiffy), and an edit within the same tick as the download's last write keeps its time.
        var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 0), timespec(tv_sec: 1_700_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, destination.path, &times, 0) == 0)
        #expect(!DownloadManager.isPlacedFile(at: destination.path, from: shown))
    }

    @Test(
        "the state folder deleted: the file asked for again is checked with one conditional request (304) and kept, already complete"
    )
    func deletedStateFolder() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("l.bin", size: 300_000, seed: 752)
        let destination = directory.appendingPathComponent("l.bin")
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            _ = try await manager.download(from: server.url("l.bin"), to: destination).finished()
        }
        let placed = try #require(PlacedFile.at(destination.path))
        try FileManager.default.removeItem(at: directory.appendingPathComponent(".haul"))
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            let download = try manager.download(from: server.url("l.bin"), to: destination)
            #expect(try await download.finished() == destination)
            #expect(download.wasAlreadyComplete)
        }
        #expect(try Data(contentsOf: destination) == source)
        #expect(PlacedFile.at(destination.path) == placed, "the same file, not written again")
        // Before: fetched again whole (or, into a folder, as l.bin.1).
        #expect(server.accessLog().map(\.status) == [200, 304], "\(server.accessLog())")
    }

    @Test("the state folder deleted and the file changed on the server, or edited here: fetched again, not kept")
    func changedSinceTheJournalWasLost() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("c.bin", size: 200_000, seed: 753)
        _ = try server.makeFile("e.bin", size: 200_000, seed: 754)
        let (changed, edited) = (directory.appendingPathComponent("c.bin"), directory.appendingPathComponent("e.bin"))
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            _ = try await manager.download(from: server.url("c.bin"), to: changed).finished()
            _ = try await manager.download(from: server.url("e.bin"), to: edited).finished()
        }
        try FileManager.default.removeItem(at: directory.appendingPathComponent(".haul"))
        // A new version on the server (another time: nginx's ETag is the time and the length).
        let newer = try server.makeFile("c.bin", size: 200_000, seed: 755)
        var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 0), timespec(tv_sec: 1_700_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, server.root.appendingPathComponent("c.bin").path, &times, 0) == 0)
        // The file here edited in place, to the same length (its time set apart from the recorded
        // one, as in fileRecordsItsOrigin: file times tick by the jiffy).
        let handle = try FileHandle(forWritingTo: edited)
        try handle.write(contentsOf: Data(repeating: 0x41, count: 10))
        try handle.close()
        #expect(utimensat(AT_FDCWD, edited.path, &times, 0) == 0)
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            let download = try manager.download(from: server.url("c.bin"), to: changed)
            _ = try await download.finished()
            #expect(!download.wasAlreadyComplete)
            let other = try manager.download(from: server.url("e.bin"), to: edited)
            _ = try await other.finished()
            #expect(!other.wasAlreadyComplete)
        }
        #expect(try Data(contentsOf: changed) == newer)
        #expect(try Data(contentsOf: edited) == NginxServer.bytes(count: 200_000, seed: 754))
        let log = server.accessLog().map { "\($0.uri) \($0.status)" }
        // c.bin: asked conditionally, answered with the new version; e.bin: fetched whole (its recorded
        // time no longer matches).
        #expect(log.filter { $0.hasPrefix("/c.bin") } == ["/c.bin 200", "/c.bin 200"], "\(log)")
        #expect(log.filter { $0.hasPrefix("/e.bin") } == ["/e.bin 200", "/e.bin 200"], "\(log)")
    }
}
