import Foundation
import Testing

@testable import Haul

@Suite("Journal")
struct JournalTests {
    @Test func recordsRoundTripAndMigrateOnReopen() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let id = DownloadID(url: "http://h/a", destinationPath: "/tmp/a")
        var record = DownloadRecord(url: "http://h/a", destination: "/tmp/a")
        record.totalBytes = 1000
        record.entityTag = "\"abc\""
        record.bytesCommitted = 400
        record.state = .paused
        do {
            let journal = try Journal(directory: directory.path)
            #expect(try journal.record(for: id) == nil)
            try journal.save(record, for: id)
            record.lastError = "boom"
            try journal.save(record, for: id)
            journal.close()
        }
        let reopened = try Journal(directory: directory.path)
        #expect(try reopened.record(for: id) == record)
        #expect(try reopened.allRecords().map(\.0) == [id])
        reopened.remove(id)
        #expect(try reopened.record(for: id) == nil)
    }

    @Test func aSecondOpenOfTheSameDirectoryIsLocked() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try Journal(directory: directory.path)
        #expect { try Journal(directory: directory.path) } throws: { ($0 as? DownloadError)?.code == .journalLocked }
        first.close()
        _ = try Journal(directory: directory.path)
    }

    @Test func garbageIsAClearErrorAndIsLeftAlone() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let path = directory.appendingPathComponent(Journal.fileName)
        try garbage.write(to: path)
        #expect { try Journal(directory: directory.path) } throws: { error in
            guard let error = error as? DownloadError else { return false }
            return error.code == .journal && error.path == path.path && error.description.contains("not a Haul journal")
        }
        #expect(try Data(contentsOf: path) == garbage)
    }

    @Test func aJournalFromANewerHaulIsRefused() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(Journal.fileName).path
        let sqlite = try ChildProcess("/usr/bin/sqlite3", [path, "PRAGMA user_version = 99;"])
        guard sqlite.wait() == 0 else {
            Issue.record("sqlite3 is needed for this test (installed by the README's test command)")
            return
        }
        #expect { try Journal(directory: directory.path) } throws: { error in
            guard let error = error as? DownloadError else { return false }
            return error.code == .journal && error.description.contains("newer Haul")
        }
    }
}

@Suite("Journal in use")
struct JournalIntegrationTests {
    @Test("a garbage journal fails the download clearly and touches no user file")
    func garbageJournalTouchesNothing() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = directory.appendingPathComponent(".haul")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let garbage = Data(repeating: 0x5A, count: 4096)
        try garbage.write(to: state.appendingPathComponent(Journal.fileName))
        let existing = Data("the user's file".utf8)
        let destination = directory.appendingPathComponent("file.bin")
        try existing.write(to: destination)
        try await withDownloadManager { manager in
            let download = try manager.download(from: "http://127.0.0.1:1/file.bin", to: destination)
            await #expect { try await download.finished() } throws: { error in
                guard let error = error as? DownloadError else { return false }
                return error.code == .journal && error.url == "http://127.0.0.1:1/file.bin"
            }
        }
        #expect(try Data(contentsOf: destination) == existing)
        #expect(try Data(contentsOf: state.appendingPathComponent(Journal.fileName)) == garbage)
    }

    @Test("two managers on one state directory: the second is told it is locked")
    func lockedStateDirectory() async throws {
        let server = try NginxServer.start()
        defer { server.stop() }
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = try server.makeFile("locked.bin", size: 2 * 1024 * 1024)
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        let first = try DownloadManager(configuration: configuration)
        let owner = try first.download(from: server.url("slow/locked.bin"), to: directory.appendingPathComponent("a.bin"))
        var events = owner.events.makeAsyncIterator()
        await events.next { if case .receiving = $0 { true } else { false } }
        try await withDownloadManager(configuration: configuration) { second in
            let other = try second.download(from: server.url("locked.bin"), to: directory.appendingPathComponent("b.bin"))
            await #expect { try await other.finished() } throws: { ($0 as? DownloadError)?.code == .journalLocked }
        }
        #expect(try await owner.finished() == directory.appendingPathComponent("a.bin"))
        await first.shutdown()
        #expect(try Data(contentsOf: directory.appendingPathComponent("a.bin")) == source)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("b.bin").path))
    }

    @Test("the journal records a paused download's bytes and validators, and its completion")
    func journalCheckpoints() async throws {
        let server = try NginxServer.start()
        defer { server.stop() }
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let size = 2 * 1024 * 1024
        try server.makeFile("j.bin", size: size)
        let destination = directory.appendingPathComponent("j.bin")
        let manager = try DownloadManager()
        let download = try manager.download(from: server.url("slow/j.bin"), to: destination)
        var events = download.events.makeAsyncIterator()
        await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
        await manager.shutdown()
        let journal = try Journal(directory: download.stateDirectory.path)
        let paused = try #require(try journal.record(for: download.id))
        #expect(paused.state == .paused)
        #expect(paused.bytesCommitted == download.progress.bytesReceived)
        #expect(paused.bytesCommitted == Transfer.fileLength(journal.partialPath(for: download.id)))
        #expect(paused.totalBytes == Int64(size))
        #expect(paused.entityTag?.isEmpty == false)
        #expect(paused.lastModified?.isEmpty == false)
        #expect(paused.attempts == 1)
        journal.close()

        try await withDownloadManager { manager in
            _ = try await manager.download(from: server.url("slow/j.bin"), to: destination).finished()
        }
        let after = try Journal(directory: download.stateDirectory.path)
        let completed = try #require(try after.record(for: download.id))
        #expect(completed.state == .completed)
        #expect(completed.bytesCommitted == Int64(size))
        #expect(completed.attempts == 2)
    }
}
