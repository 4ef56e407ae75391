import Foundation
import Synchronization
import Testing

@testable import Haul

@Suite("Journal")
struct JournalTests {
    @Test func recordsRoundTripAndMigrateOnReopen() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let id = DownloadID(destinationPath: "/tmp/a")
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

    @Test("a claim returns the queue head's row as it is at the claim, and nothing once it left the queue")
    func claimSeesChangesSinceThePeek() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let journal = try Journal(directory: directory.path)
        defer { journal.close() }
        let ids = try journal.queueRows(2)
        let now = Date().timeIntervalSince1970
        // Unchanged since the peek: the peeked row, now running.
        let first = try #require(try journal.nextQueued(at: now).head)
        #expect(first.id == ids[0])
        let claimed = try #require(try journal.claim(first))
        #expect(claimed.state == .running && claimed.url == "http://h/0")
        #expect(try journal.record(for: ids[0])?.state == .running)
        #expect(try journal.claim(first) == nil)  // not queued any more
        // Changed after the peek (a caller asked for a checksum): the claim returns the row as stored.
        let second = try #require(try journal.nextQueued(at: now).head)
        var changed = try #require(try journal.record(for: ids[1]))
        changed.expectedChecksum = "sha256:" + String(repeating: "ab", count: 32)
        try journal.save(changed, for: ids[1])
        let fresh = try #require(try journal.claim(second))
        #expect(fresh.expectedChecksum == changed.expectedChecksum)
        #expect(fresh.state == .running)
    }

    @Test("heads read together come in the queue's order, and each claim keeps the next head's record trusted")
    func headsReadTogetherAreClaimedOneAfterAnother() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let journal = try Journal(directory: directory.path)
        defer { journal.close() }
        let ids = try journal.queueRows(5) { index, record in
            record.url = "http://h\(index % 2)/\(index)"
            record.priority = index == 3 ? 1 : 0
            record.host = "h\(index % 2):80"
        }
        let now = Date().timeIntervalSince1970
        // Priority first, then first in; the read stops at its limit and says more may be queued.
        var heads = journal.nextQueuedOrFail(at: now, limit: 3)
        #expect(heads.count == 3 && heads.mayHaveMore && !heads.blocked)
        var claimed: [String] = []
        while let head = heads.removeFirst() {
            let record = try #require(try journal.claim(head, unchangedSince: &heads.changes))
            #expect(record.state == .running)
            claimed.append(record.url)
        }
        #expect(claimed == ["http://h1/3", "http://h0/0", "http://h1/1"])
        // Excluding a host: its rows are passed over (blocked), the rest read to the end.
        heads = journal.nextQueuedOrFail(at: now, excludingHosts: ["h0:80"], limit: 3)
        #expect(heads.count == 0 && heads.blocked && !heads.mayHaveMore)
        heads = journal.nextQueuedOrFail(at: now, limit: 3)
        #expect(heads.count == 2 && !heads.mayHaveMore)
        // Another row changed after the read: the next claim reads its row again, and so does every
        // one after it (the count of changes no longer tells).
        let taken = heads.removeFirst()
        let first = try #require(taken)
        var changed = try #require(try journal.record(for: ids[4]))
        changed.expectedChecksum = "sha256:" + String(repeating: "cd", count: 32)
        try journal.save(changed, for: ids[4])
        let before = heads.changes
        #expect(try journal.claim(first, unchangedSince: &heads.changes)?.url == "http://h0/2")
        #expect(heads.changes == before)
        let next = heads.removeFirst()
        let second = try #require(next)
        #expect(try journal.claim(second, unchangedSince: &heads.changes)?.expectedChecksum == changed.expectedChecksum)
        #expect(heads.removeFirst() == nil)
        #expect(journal.nextQueuedOrFail(at: now, limit: 3).count == 0)
    }

    @Test("a claim and a transfer's writes find their row where it was claimed, never another row in its place")
    func rowWritesFollowTheRowNotItsPlace() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let journal = try Journal(directory: directory.path)
        defer { journal.close() }
        let (a, b) = (DownloadID(destinationPath: "/tmp/a"), DownloadID(destinationPath: "/tmp/b"))
        func queued(_ name: String) -> DownloadRecord {
            var record = DownloadRecord(url: "http://h/\(name)", destination: "/tmp/\(name)")
            record.state = .queued
            return record
        }
        let now = Date().timeIntervalSince1970

        // A head read, then its row removed and another row queued in its place (SQLite gives the new
        // row the freed rowid): the claim takes neither.
        try journal.save(queued("a"), for: a)
        let stale = try #require(try journal.nextQueued(at: now).head)
        journal.remove(a)
        try journal.save(queued("b"), for: b)
        #expect(try journal.nextQueued(at: now).head?.rowID == stale.rowID)
        #expect(try journal.claim(stale) == nil)
        #expect(try journal.record(for: b)?.state == .queued)

        // The claimed row's writes land on it by its place.
        let head = try #require(try journal.nextQueued(at: now).head)
        var running = try #require(try journal.claim(head))
        running.bytesCommitted = 10
        try journal.update(running, for: b, at: head.rowID)
        #expect(try journal.record(for: b) == running)

        // Removed and queued again while running, it is in another place: found by its id, and the
        // row now in its old place (another download's) is left as it is.
        journal.remove(b)
        try journal.save(queued("a"), for: a)  // takes b's old place
        try journal.save(queued("b"), for: b)
        running.bytesCommitted = 20
        try journal.update(running, for: b, at: head.rowID)
        #expect(try journal.record(for: b) == running)
        #expect(try journal.record(for: a) == queued("a"))
    }

    @Test("the loop thread's writes share one transaction per turn; a failed transaction inside it rolls back alone")
    func batchedWrites() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let batch = WriteBatch()
        batch.attachCurrentThread()
        let ids = (0..<3).map { DownloadID(destinationPath: "/tmp/\($0)") }
        let record = DownloadRecord(url: "http://h/0", destination: "/tmp/0")
        do {
            let journal = try Journal(directory: directory.path, batch: batch)
            try journal.save(record, for: ids[0])
            #expect(try journal.record(for: ids[0]) == record)  // visible inside the turn
            #expect {
                try journal.transaction { () throws(DownloadError) in
                    try journal.save(record, for: ids[1])
                    throw DownloadError(code: .journal, url: nil, detail: "abandoned")
                }
            } throws: { ($0 as? DownloadError)?.detail == "abandoned" }
            #expect(try journal.record(for: ids[1]) == nil)  // rolled back; the turn's first row stays
            #expect(try journal.record(for: ids[0]) == record)
            try journal.save(record, for: ids[2])
            #expect(batch.commit().isEmpty)
            #expect(batch.commit().isEmpty)  // nothing left open
            try journal.save(record, for: ids[1])
            journal.close()  // commits the open turn
        }
        let reopened = try Journal(directory: directory.path)
        #expect(try Set(reopened.allRecords().map(\.0)) == Set(ids))
    }

    @Test("a thread waiting for the journal gets it at the loop thread's next write, not at the end of its turn")
    func batchYieldsToWaitingThreads() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let batch = WriteBatch()
        batch.attachCurrentThread()
        let journal = try Journal(directory: directory.path, batch: batch)
        let loopRow = DownloadID(destinationPath: "/tmp/loop")
        let callerRow = DownloadID(destinationPath: "/tmp/caller")
        let record = DownloadRecord(url: "http://h/x", destination: "/tmp/x")
        try journal.save(record, for: loopRow)  // the batch is open: the caller's write must wait

        let callerDone = DispatchSemaphore(value: 0)
        let caller = Thread {
            try? journal.save(record, for: callerRow)
            callerDone.signal()
        }
        caller.start()
        // Bounded wait for the caller to be blocked on the journal (no sleep decides the outcome).
        let deadline = Date().addingTimeInterval(10)
        while journal.waitingThreads == 0 && Date() < deadline { sched_yield() }
        #expect(journal.waitingThreads == 1)
        #expect(callerDone.wait(timeout: .now()) == .timedOut)

        try journal.save(record, for: loopRow)  // the next write commits and lets the caller in
        #expect(callerDone.wait(timeout: .now() + 10) == .success)
        #expect(batch.commit().isEmpty)
        journal.close()
        let reopened = try Journal(directory: directory.path)
        #expect(try Set(reopened.allRecords().map(\.0)) == [loopRow, callerRow])
    }

    @Test(
        "a version-2 journal is migrated: its rows survive with ids of their destinations (partials renamed), interrupted ones in their old order"
    )
    func migratesFromVersion2() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(Journal.fileName).path
        let schema = """
            CREATE TABLE downloads (id TEXT PRIMARY KEY NOT NULL, url TEXT NOT NULL, destination TEXT NOT NULL,
                total_bytes INTEGER, etag TEXT, last_modified TEXT, bytes_committed INTEGER NOT NULL DEFAULT 0,
                state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT,
                priority INTEGER NOT NULL DEFAULT 0, expected_checksum TEXT, created_at REAL NOT NULL,
                updated_at REAL NOT NULL, bytes_synced INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
            INSERT INTO downloads VALUES ('b', 'http://h/b', '/tmp/b', 900, '"e"', NULL, 300, 'running', 1, NULL, 0, NULL, 20, 20, 256);
            INSERT INTO downloads VALUES ('a', 'http://h/a', '/tmp/a', NULL, NULL, NULL, 0, 'queued', 0, NULL, 0, NULL, 10, 10, 0);
            INSERT INTO downloads VALUES ('c', 'http://h/c', '/tmp/c', 5, NULL, NULL, 5, 'completed', 1, NULL, 0, NULL, 5, 5, 5);
            INSERT INTO downloads VALUES ('d', 'http://mirror/b', '/tmp/b', NULL, NULL, NULL, 7, 'paused', 1, NULL, 0, NULL, 1, 1, 0);
            PRAGMA user_version = 2;
            """
        let sqlite = try ChildProcess("/usr/bin/sqlite3", [path, schema])
        guard await sqlite.exited() == 0 else {
            Issue.record("sqlite3 is needed for this test (installed by the README's test command)")
            return
        }
        // Partial files under the old ids: b's is renamed with its row; d's row (the same destination,
        // written earlier) goes, with its partial.
        try Data(repeating: 1, count: 300).write(to: directory.appendingPathComponent("b.part"))
        try Data(repeating: 2, count: 7).write(to: directory.appendingPathComponent("d.part"))
        let journal = try Journal(directory: directory.path)
        defer { journal.close() }
        let ids = ["a", "b", "c"].map { DownloadID(destinationPath: "/tmp/\($0)") }
        #expect(try Set(journal.allRecords().map(\.0)) == Set(ids))
        #expect(FilePath.fileLength(journal.partialPath(for: ids[1])) == 300)
        #expect(FilePath.fileLength(directory.appendingPathComponent("b.part").path) == nil)
        #expect(FilePath.fileLength(directory.appendingPathComponent("d.part").path) == nil)
        let b = try #require(try journal.record(for: ids[1]))
        #expect(b.state == .interrupted)
        #expect(b.host == "h:80")
        #expect(b.totalBytes == 900 && b.entityTag == "\"e\"" && b.bytesCommitted == 300 && b.bytesSynced == 256)
        #expect(b.url == "http://h/b")
        #expect(try journal.record(for: ids[2])?.state == .completed)
        try journal.requeueInterrupted()
        // First in, first out: "a" was created before "b".
        #expect(try journal.nextQueued(at: Date().timeIntervalSince1970).head?.id == ids[0])
        #expect(try journal.unfinishedRecords().map(\.0) == [ids[0], ids[1]])
    }

    @Test("two opens of one journal share it, each admitting its own rows; an exclusive one is refused meanwhile")
    func twoOpensShareAJournal() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // The lock file of an owner killed with no row left to it: swept by the next open.
        let stale = directory.appendingPathComponent("owner-1-dead.lock")
        try Data().write(to: stale)
        let first = try Journal(directory: directory.path)
        #expect(!FileManager.default.fileExists(atPath: stale.path))
        let second = try Journal(directory: directory.path)
        #expect(first.owner != second.owner)
        #expect(
            FileManager.default.fileExists(atPath: directory.appendingPathComponent("owner-\(first.owner).lock").path)
        )
        #expect { try Journal(directory: directory.path, exclusive: true) } throws: {
            ($0 as? DownloadError)?.code == .journalLocked
        }
        let a = DownloadID(destinationPath: "/tmp/a")
        let b = DownloadID(destinationPath: "/tmp/b")
        try first.save(DownloadRecord(url: "http://h/a", destination: "/tmp/a"), for: a)
        try second.save(DownloadRecord(url: "http://h/b", destination: "/tmp/b"), for: b)
        // Each queue is its opener's rows; the other's are neither seen nor claimed.
        let now = Date().timeIntervalSince1970
        #expect(try first.nextQueued(at: now, limit: 10).first?.id == a)
        #expect(try first.nextQueued(at: now, limit: 10).count == 1)
        let head = try #require(try second.nextQueued(at: now).head)
        #expect(head.id == b)
        #expect(try first.claim(head) == nil)
        #expect(try second.claim(head)?.state == .running)
        #expect(try first.standing(of: b)?.owner == second.owner)
        #expect(first.isAnotherLiveOwner(second.owner) && !first.isAnotherLiveOwner(first.owner))
        // The second goes without a word (its lock released): its rows are taken back as interrupted
        // by the next look, its lock file removed; the first's queued row stays its own.
        let secondOwner = second.owner
        second.close()
        #expect(!first.isAnotherLiveOwner(secondOwner))
        // A listing meanwhile (the first has it open: read as it stands) shows it interrupted.
        #expect(try Journal.entries(directory: directory.path).first { $0.id == b }?.state == .interrupted)
        #expect(try first.transaction { () throws(DownloadError) in try first.releaseRowsOfGoneOwners() } == 1)
        #expect(try first.record(for: b)?.state == .interrupted)
        #expect(try first.standing(of: b)?.owner == nil)
        #expect(try first.record(for: a)?.state == .queued)
        #expect(
            !FileManager.default.fileExists(atPath: directory.appendingPathComponent("owner-\(secondOwner).lock").path)
        )
        first.close()
        let exclusive = try Journal(directory: directory.path, exclusive: true)
        // The first closed with a row queued: nobody owns it now.
        #expect(try exclusive.record(for: a)?.state == .interrupted)
        exclusive.close()
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

    @Test("a journal that cannot be opened names the system's reason, not SQLite's \"unable to open\"")
    func unopenableJournalNamesTheCause() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(Journal.fileName)
        try FileManager.default.createDirectory(at: path, withIntermediateDirectories: false)
        #expect { try Journal(directory: directory.path) } throws: { error in
            guard let error = error as? DownloadError else { return false }
            return error.code == .fileSystem && error.errno == EISDIR && error.path == path.path
                && error.description.contains("Is a directory") && !error.description.contains("kept")
        }
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory
        #expect { try DownloadManager(configuration: configuration) } throws: {
            ($0 as? DownloadError)?.errno == EISDIR
        }
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: path.path, isDirectory: &isDirectory) && isDirectory.boolValue)
    }

    @Test func aJournalFromANewerHaulIsRefused() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(Journal.fileName).path
        let sqlite = try ChildProcess("/usr/bin/sqlite3", [path, "PRAGMA user_version = 99;"])
        guard await sqlite.exited() == 0 else {
            Issue.record("sqlite3 is needed for this test (installed by the README's test command)")
            return
        }
        #expect { try Journal(directory: directory.path) } throws: { error in
            guard let error = error as? DownloadError else { return false }
            return error.code == .journal && error.description.contains("newer Haul")
        }
    }
}

@Suite("Journal in use", .timeLimit(.minutes(2)))
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

    @Test("two managers creating one journal at once both open it (the switch to WAL is waited for), 100 times")
    func twoFirstOpensAtOnce() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for round in 0..<100 {
            let path = directory.appendingPathComponent("\(round)").path
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                do {
                    try Journal(directory: path).close()
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "round \(round)")
        }
    }

    @Test("a state directory opened exclusively (a take-over): a manager's start fails clearly, or its download")
    func lockedStateDirectory() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("locked.bin", size: 64 * 1024)
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent(".haul")
        let holder = try Journal(directory: directory.appendingPathComponent(".haul").path, exclusive: true)
        #expect { try DownloadManager(configuration: configuration) } throws: { error in
            guard let error = error as? DownloadError else { return false }
            return error.code == .journalLocked && error.description.contains("in use by another")
        }
        // A manager that failed to start leaves nothing open: 200 attempts would otherwise leave 200
        // multi handles' wake-up socket pairs (400 descriptors). Other tests' managers come and go
        // meanwhile, a few pairs each.
        let unixSocketsBefore = Descriptors.unixSockets().count
        for _ in 0..<200 { _ = try? DownloadManager(configuration: configuration) }
        #expect(Descriptors.unixSockets().count < unixSocketsBefore + 100)
        // Without a configured state directory (the default `.haul` beside b.bin is the same folder)
        // the lock is met on the first download instead.
        try await withDownloadManager { second in
            let other = try second.download(
                from: server.url("locked.bin"),
                to: directory.appendingPathComponent("b.bin")
            )
            await #expect { try await other.finished() } throws: { ($0 as? DownloadError)?.code == .journalLocked }
        }
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("b.bin").path))
        holder.close()
        let manager = try DownloadManager(configuration: configuration)
        #expect(
            try await manager.download(from: server.url("locked.bin"), to: directory.appendingPathComponent("b.bin"))
                .finished() == directory.appendingPathComponent("b.bin")
        )
        await manager.shutdown()
    }

    @Test("the journal records a paused download's bytes and validators, and its completion")
    func journalCheckpoints() async throws {
        // The first response goes silent after 300,000 bytes: the shutdown always comes first.
        let server = try FaultServer.start()
        let directory = try makeTemporaryDirectory()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        let size = 2 * 1024 * 1024
        let url = server.url("stall/300000/\(size)")
        let destination = directory.appendingPathComponent("j.bin")
        let manager = try DownloadManager()
        let download = try manager.download(from: url, to: destination)
        var events = download.events.makeAsyncIterator()
        await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
        await manager.shutdown()
        let journal = try Journal(directory: download.stateDirectory.path)
        let paused = try #require(try journal.record(for: download.id))
        #expect(
            paused.state == .interrupted,
            "interrupted by a shutdown, not paused by the user: the next manager continues it"
        )
        #expect(paused.bytesCommitted == download.progress.bytesReceived)
        #expect(paused.bytesCommitted == FilePath.fileLength(journal.partialPath(for: download.id)))
        #expect(paused.totalBytes == Int64(size))
        #expect(paused.entityTag?.isEmpty == false)
        #expect(paused.lastModified?.isEmpty == false)
        #expect(paused.attempts == 1)
        journal.close()

        try await withDownloadManager { manager in
            _ = try await manager.download(from: url, to: destination).finished()
            // A finished download is no longer a `Download`, but its journal entry is one lookup away.
            #expect(manager.download(id: download.id) == nil)
            let entry = try #require(manager.journalEntry(id: download.id))
            #expect(entry.state == .completed)
            #expect(entry.destination == destination.path)
            #expect(entry.bytesReceived == Int64(size) && entry.totalBytes == Int64(size))
            #expect(
                manager.journalEntry(
                    id: DownloadID(destination: directory.appendingPathComponent("other.bin"))
                ) == nil
            )
        }
        #expect(try Data(contentsOf: destination) == FaultServer.body(size: size))
        let after = try Journal(directory: download.stateDirectory.path)
        let completed = try #require(try after.record(for: download.id))
        #expect(completed.state == .completed)
        #expect(completed.bytesCommitted == Int64(size))
        #expect(completed.attempts == 2)
    }

    @Test(
        "a partial file whose journal was deleted is resumed once its overlap matches, opted in to unvalidated resumes or not",
        arguments: [false, true]
    )
    func partialWithoutJournal(resumesWithoutValidator: Bool) async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("o.bin", size: 600_000, seed: 11)
        let state = directory.appendingPathComponent("state")
        let destination = directory.appendingPathComponent("o.bin")
        let url = server.url("o.bin")
        let id = DownloadID(destination: destination)
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        try source.prefix(250_000).write(to: state.appendingPathComponent("\(id.rawValue).part"))
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        configuration.resumesWithoutValidator = resumesWithoutValidator
        let (placed, restarts) = try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(from: url, to: destination)
            var restarts: [RestartReason] = []
            for await event in download.events { if case .restarted(let reason) = event { restarts.append(reason) } }
            return (try await download.finished(), restarts)
        }
        #expect(placed == destination)
        #expect(try Data(contentsOf: destination) == source)
        let requests = await server.requests(to: "/o.bin", atLeast: 1)
        // Issue 56, item 5: the overlap is what proves a partial whose row is gone (before, without
        // the opt-in, it started over: ["-"], [200], [.noValidator]).
        #expect(requests.map(\.range) == ["bytes=\(250_000 - 65_536)-"])
        #expect(requests.map(\.status) == [206])
        #expect(restarts.isEmpty)
    }

    @Test("a partial file whose journal was deleted and whose overlap differs starts over: never spliced")
    func partialWithoutJournalOfAnotherFile() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("x.bin", size: 600_000, seed: 13)
        let state = directory.appendingPathComponent("state")
        let destination = directory.appendingPathComponent("x.bin")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let other = NginxServer.bytes(count: 250_000, seed: 99)
        try other.write(to: state.appendingPathComponent("\(DownloadID(destination: destination).rawValue).part"))
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        let restarts = try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(from: server.url("x.bin"), to: destination)
            var restarts: [RestartReason] = []
            for await event in download.events { if case .restarted(let reason) = event { restarts.append(reason) } }
            _ = try await download.finished()
            return restarts
        }
        #expect(try Data(contentsOf: destination) == source)
        #expect(restarts == [.overlapMismatch])
    }

    @Test("bytes in a partial file that no recorded response vouches for are replaced, not continued")
    func unvouchedPartialIsReplaced() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("u.bin", size: 600_000, seed: 12)
        let state = directory.appendingPathComponent("state")
        let destination = directory.appendingPathComponent("u.bin")
        let url = server.url("u.bin")
        let id = DownloadID(destination: destination)
        // A crash after the loop wrote bytes but before its turn's journal commit: the row says the
        // download was running and never accepted a response; the partial holds bytes of another file.
        do {
            let journal = try Journal(directory: state.path)
            var record = DownloadRecord(url: url.absoluteString, destination: destination.path)
            record.host = url.hostKey
            record.state = .running
            try journal.save(record, for: id)
            journal.close()
        }
        try Data(repeating: 0x5A, count: 300_000).write(to: state.appendingPathComponent("\(id.rawValue).part"))
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        let placed = try await withDownloadManager(configuration: configuration) { manager in
            try await #require(manager.download(id: id)).finished()
        }
        #expect(placed == destination)
        #expect(try Data(contentsOf: destination) == source)
        let requests = await server.requests(to: "/u.bin", atLeast: 1)
        #expect(requests.map(\.range) == ["-"])
    }

    @Test(
        "a row has its response's validators before the first bytes reach the partial file; a small file writes it once, whole"
    )
    func rowPrecedesBytes() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 2 * 1024 * 1024
        try server.makeFile("v.bin", size: size)
        let small = try server.makeFile("s.bin", size: 60 * 1024, seed: 3)
        // The default state directory, named: a journal the manager was given is never closed as idle,
        // and this test reads rows through its own reference to it.
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent(".haul")
        let manager = try DownloadManager(configuration: configuration)
        // Slow: its first bytes go to the partial file as they come.
        let slow = try manager.download(from: server.url("slow/v.bin"), to: directory.appendingPathComponent("v.bin"))
        var events = slow.events.makeAsyncIterator()
        await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
        let journal = try #require(manager.catalog.openJournal(for: slow.stateDirectory.path))
        let row = try #require(try journal.record(for: slow.id))
        #expect(row.attempts == 1)
        #expect(row.entityTag?.isEmpty == false)
        #expect(row.totalBytes == Int64(size))
        // Fast and within one buffer: the finish job writes the file whole, and its row at the end.
        let fast = try manager.download(from: server.url("s.bin"), to: directory.appendingPathComponent("s.bin"))
        #expect(try await fast.finished() == directory.appendingPathComponent("s.bin"))
        #expect(try Data(contentsOf: directory.appendingPathComponent("s.bin")) == small)
        let completed = try #require(try journal.record(for: fast.id))
        #expect(completed.state == .completed && completed.attempts == 1 && completed.entityTag?.isEmpty == false)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: fast.stateDirectory.path)
            .filter { $0.hasPrefix(fast.id.rawValue) }
        #expect(leftovers.isEmpty)
        await manager.shutdown()
    }

    @Test("a new manager on the journal continues interrupted downloads, keeps paused ones paused, re-attaches by id")
    func restartRecovery() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let size = 2 * 1024 * 1024
        // Both first responses go silent part-way (300,000 and 200,000 bytes), so neither download can
        // finish before the test pauses or shuts it down, however slow the machine is (nginx's rate
        // limit could not promise that under a loaded CI run); every later request is answered in full.
        let faults = try FaultServer.start()
        defer { faults.stop() }
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")

        let first = try DownloadManager(configuration: configuration)
        let a = try first.download(
            from: faults.url("stall/300000/1048576"),
            to: directory.appendingPathComponent("running.bin")
        )
        let b = try first.download(
            from: faults.url("stall/200000/\(size)"),
            to: directory.appendingPathComponent("paused.bin")
        )
        var aEvents = a.events.makeAsyncIterator()
        var bEvents = b.events.makeAsyncIterator()
        await aEvents.next { if case .progress = $0 { true } else { false } }
        await bEvents.next { if case .progress = $0 { true } else { false } }
        b.pause()
        await bEvents.next { if case .paused = $0 { true } else { false } }
        await first.shutdown()

        // The first manager is shut down, so the journal is free again.
        let second = try DownloadManager(configuration: configuration)
        #expect(Set(second.downloads.map(\.id)) == [a.id, b.id])
        let restoredA = try #require(second.download(id: a.id))
        let restoredB = try #require(second.download(id: b.id))
        #expect(restoredA.url == a.url)
        #expect(try await restoredA.finished() == directory.appendingPathComponent("running.bin"))
        var restoredBEvents = restoredB.events.makeAsyncIterator()
        #expect(await restoredBEvents.next() == .paused(restoredB.progress))
        #expect(restoredB.progress.bytesReceived > 0)
        restoredB.resume()
        #expect(try await restoredB.finished() == directory.appendingPathComponent("paused.bin"))
        await second.shutdown()

        #expect(
            try Data(contentsOf: directory.appendingPathComponent("running.bin")) == FaultServer.body(size: 1_048_576)
        )
        #expect(try Data(contentsOf: directory.appendingPathComponent("paused.bin")) == FaultServer.body(size: size))
        // Each resumed once, from bytes its first response sent, pinned to its validator.
        for (path, sent) in [("/stall/300000/1048576", 300_000), ("/stall/200000/\(size)", 200_000)] {
            let requests = faults.requests(to: path)
            #expect(requests.count == 2 && requests[0].range == nil && requests[1].ifRange != nil, "\(path)")
            let offset = requests.last?.range.flatMap { Int($0.dropFirst("bytes=".count).dropLast()) }
            #expect(offset.map { $0 > 0 && $0 <= sent } == true, "\(path): \(requests.map(\.range))")
        }
    }

    @Test(
        "a manager opens a journal another has open, leaving its running row alone; with resumption off, all restore paused"
    )
    func startupBesideAnotherAndNoResume() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory
        configuration.resumesUnfinishedDownloads = false
        let journal = try Journal(directory: directory.path)
        let id = DownloadID(destinationPath: directory.appendingPathComponent("x").path)
        try journal.save(
            DownloadRecord(
                url: "http://127.0.0.1:1/x",
                destination: directory.appendingPathComponent("x").path,
                state: .running
            ),
            for: id
        )
        // The row is the journal's opener's, which still runs: a manager beside it leaves it running.
        try await withDownloadManager(configuration: configuration) { _ in }
        #expect(try journal.record(for: id)?.state == .running)
        journal.close()
        try await withDownloadManager(configuration: configuration) { manager in
            let restored = try #require(manager.download(id: id))
            var events = restored.events.makeAsyncIterator()
            #expect(await events.next { if case .paused = $0 { true } else { false } } != nil)
            #expect(restored.state == .paused)
        }
        // Held back by configuration, not paused by the user: it stays "interrupted", and a manager that
        // resumes unfinished downloads continues it.
        let reopened = try Journal(directory: directory.path)
        #expect(try reopened.record(for: id)?.state == .interrupted)
    }

    @Test("the remote file changing between two runs yields the new file, whole")
    func remoteChangedBetweenRuns() async throws {
        // Each request gets another version (bytes, ETag, Last-Modified); the first goes silent after
        // 300,000 bytes, so the shutdown always comes first.
        let server = try FaultServer.start()
        let directory = try makeTemporaryDirectory()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        let size = 2 * 1024 * 1024
        let destination = directory.appendingPathComponent("v.bin")
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")

        let first = try DownloadManager(configuration: configuration)
        let download = try first.download(from: server.url("changing-stall/300000/\(size)"), to: destination)
        var events = download.events.makeAsyncIterator()
        await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
        await first.shutdown()
        #expect(download.progress.bytesReceived > 0)

        let second = try DownloadManager(configuration: configuration)
        let restored = try #require(second.download(id: download.id))
        var restoredEvents = restored.events.makeAsyncIterator()
        let restarted = await restoredEvents.next { if case .restarted = $0 { true } else { $0.isFinal } }
        #expect(restarted == .restarted(.remoteChanged))
        #expect(try await restored.finished() == destination)
        await second.shutdown()
        #expect(try Data(contentsOf: destination) == FaultServer.body(size: size, version: 2))
        // The resume asked for the rest of version 1 only (If-Range), and got version 2 whole.
        let requests = server.requests(to: "/changing-stall/300000/\(size)")
        #expect(requests.map(\.status) == [200, 200])
        #expect(requests.last?.ifRange == "\"v1-\(size)\"" && requests.last?.range?.hasPrefix("bytes=") == true)
    }

    @Test("after a reboot a partial is cut back to its last synced checkpoint and still ends byte-identical")
    func simulatedReboot() async throws {
        // The first response goes silent after 300,000 bytes: the pause always comes first.
        let server = try FaultServer.start()
        let directory = try makeTemporaryDirectory()
        defer {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        let size = 2 * 1024 * 1024
        let data = FaultServer.body(size: size)
        let destination = directory.appendingPathComponent("r.bin")
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.bootIDOverride = "boot-one"

        let first = try DownloadManager(configuration: configuration)
        let download = try first.download(from: server.url("stall/300000/\(size)"), to: destination)
        var events = download.events.makeAsyncIterator()
        await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
        download.pause()
        await events.next { if case .paused = $0 { true } else { false } }
        await first.shutdown()  // waits for the pause's background sync to be recorded

        // What the journal says was synced; then bytes that never reached the disk before a power
        // loss: garbage after the checkpoint, and a journal claiming more than was synced.
        let journal = try Journal(directory: configuration.stateDirectory!.path, bootID: "boot-one")
        var record = try #require(try journal.record(for: download.id))
        let synced = record.bytesSynced
        #expect(synced > 0)
        #expect(synced == download.progress.bytesReceived)
        let partial = journal.partialPath(for: download.id)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: partial))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 0xEE, count: 100_000))
        try handle.close()
        record.bytesCommitted = synced + 100_000
        try journal.save(record, for: download.id)
        journal.close()

        configuration.bootIDOverride = "boot-two"
        try await withDownloadManager(configuration: configuration) { manager in
            let restored = try #require(manager.download(id: download.id))
            #expect(restored.progress.bytesReceived == 0 || restored.progress.bytesReceived == synced)
            restored.resume()
            #expect(try await restored.finished() == destination)
        }
        #expect(try Data(contentsOf: destination) == data)
        let requests = server.requests(to: "/stall/300000/\(size)")
        #expect(requests.contains { $0.range == "bytes=\(synced)-" }, "resumed from the synced checkpoint")

        // Without a reboot the same journal is trusted as it is: a process crash keeps what the
        // kernel had, so nothing is cut.
        let sameBoot = try Journal(directory: configuration.stateDirectory!.path, bootID: "boot-two")
        #expect(!sameBoot.recoveredFromReboot)
    }
}

@Suite("A segmented download after a reboot")
struct SegmentedRebootTests {
    @Test("after a reboot each segment is cut back to its own synced bytes, and the file still ends byte-identical")
    func eachSegmentCutBack() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 8 * 1024 * 1024
        let data = try server.makeFile("seg.bin", size: size, seed: 31)
        let destination = directory.appendingPathComponent("seg.bin")
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.bootIDOverride = "boot-one"
        configuration.connectionsPerFile = 4
        configuration.minimumSegmentSize = 256 * 1024
        configuration.bufferSize = 64 * 1024

        let first = try DownloadManager(configuration: configuration)
        // At /crawl/ each connection gets 256 KiB at once, then 64 KB/s: still running when paused,
        // however late; the second manager's requests say `X-Speed: fast`, and get it all at once.
        let download = try first.download(from: server.url("crawl/seg.bin"), to: destination)
        var events = download.events.makeAsyncIterator()
        await events.next {
            if case .progress(let p) = $0 { p.connections >= 2 && p.bytesReceived >= 1024 * 1024 } else { false }
        }
        download.pause()
        await events.next { if case .paused = $0 { true } else { false } }
        await first.shutdown()  // waits for the pause's background sync to be recorded

        // The row's map: each segment synced as far as written. Then a power loss's damage: garbage
        // after each segment's synced bytes, and a row claiming more than was synced.
        let journal = try Journal(directory: configuration.stateDirectory!.path, bootID: "boot-one")
        var record = try #require(try journal.record(for: download.id))
        var map = try #require(record.segments.flatMap { SegmentMap(encoded: $0, total: Int64(size)) })
        #expect(map.segments.filter { $0.synced > 0 }.count >= 2)
        #expect(map.segments.allSatisfy { $0.synced == $0.written })
        let partial = journal.partialPath(for: download.id)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: partial))
        var claimed: [SegmentMap.Segment] = []
        for segment in map.segments where segment.remaining >= 50_000 {
            try handle.seek(toOffset: UInt64(segment.next))
            try handle.write(contentsOf: Data(repeating: 0xEE, count: 50_000))
            var longer = segment
            longer.written += 50_000
            claimed.append(longer)
        }
        try handle.close()
        let synced = map
        map = SegmentMap(
            segments: map.segments.map { segment in claimed.first { $0.start == segment.start } ?? segment },
            total: map.total
        )
        #expect(map.isValid)
        record.segments = map.encoded
        record.bytesCommitted = map.bytesWritten
        try journal.save(record, for: download.id)
        journal.close()

        configuration.bootIDOverride = "boot-two"
        configuration.headers = [DownloadHeader("X-Speed", "fast")]
        try await withDownloadManager(configuration: configuration) { manager in
            let restored = try #require(manager.download(id: download.id))
            #expect(restored.progress.bytesReceived == synced.bytesWritten)
            restored.resume()
            #expect(try await restored.finished() == destination)
        }
        #expect(try Data(contentsOf: destination) == data)
        // The resumed requests start where each segment was synced.
        let starts = Set(
            server.accessLog().compactMap { entry -> Int64? in
                guard entry.uri == "/crawl/seg.bin", entry.range.hasPrefix("bytes=") else { return nil }
                return Int64(entry.range.dropFirst(6).prefix { $0 != "-" })
            }
        )
        for segment in synced.segments where !segment.isDone {
            #expect(starts.contains(segment.next), "no request from \(segment.next): \(starts.sorted())")
        }
    }
}

@Suite("Secrets on disk")
struct SecretsOnDiskTests {
    @Test("a URL's user name and password work as basic auth, and reach neither the journal nor the listing")
    func urlCredentials() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("p.bin", size: 300_000, seed: 41)
        let state = directory.appendingPathComponent("state")
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        let authorized = try #require(
            URL(string: "http://alice:\(NginxServer.password)@127.0.0.1:\(server.port)/private/p.bin")
        )
        let anonymous = server.url("private/p.bin")
        let (placed, refused) = try await withDownloadManager(configuration: configuration) { manager in
            let placed = try await manager.download(from: authorized, to: directory.appendingPathComponent("p.bin"))
                .finished()
            let refused = try manager.download(from: anonymous, to: directory.appendingPathComponent("q.bin"))
            do {
                _ = try await refused.finished()
                return (placed, nil as DownloadError?)
            } catch let error as DownloadError {
                return (placed, error)
            }
        }
        #expect(try Data(contentsOf: placed) == source)
        #expect(refused?.httpStatus == 401)
        #expect(server.accessLog().filter { $0.uri == "/private/p.bin" }.map(\.status) == [200, 401])
        // The journal, its WAL and everything beside them: no password, and private.
        var status = stat()
        #expect(stat(state.path, &status) == 0 && status.st_mode & 0o777 == 0o700)
        for name in try FileManager.default.contentsOfDirectory(atPath: state.path) {
            let bytes = try Data(contentsOf: state.appendingPathComponent(name))
            #expect(bytes.range(of: Data(NginxServer.password.utf8)) == nil, "\(name) holds the password")
            #expect(stat(state.appendingPathComponent(name).path, &status) == 0 && status.st_mode & 0o077 == 0)
        }
        let entries = try DownloadManager.journalEntries(stateDirectory: state)
        #expect(entries.map(\.url).contains("http://127.0.0.1:\(server.port)/private/p.bin"))
        #expect(!entries.contains { $0.url.contains(NginxServer.password) })
    }

    @Test("a journal of an earlier version, readable by all, is made private when opened")
    func earlierJournalIsMadePrivate() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let journal = try Journal(directory: directory.path)
            journal.close()
        }
        let path = directory.appendingPathComponent(Journal.fileName).path
        #expect(chmod(path, 0o644) == 0)
        let journal = try Journal(directory: directory.path)
        defer { journal.close() }
        var status = stat()
        #expect(stat(path, &status) == 0 && status.st_mode & 0o777 == 0o600)
    }

    @Test("a URL with credentials queued with enqueue (no handle) still sends them when admitted")
    func enqueuedCredentials() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("e.bin", size: 200_000, seed: 42)
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        let url = try #require(
            URL(string: "http://alice:\(NginxServer.password)@127.0.0.1:\(server.port)/private/e.bin")
        )
        let destination = directory.appendingPathComponent("e.bin")
        try await withDownloadManager(configuration: configuration) { manager in
            let summary = try manager.enqueue([DownloadRequest(url: url, destination: destination)])
            #expect(summary.queued == 1)
            await manager.waitUntilIdle()
        }
        #expect(try Data(contentsOf: destination) == source)
        #expect(server.accessLog().filter { $0.uri == "/private/e.bin" }.map(\.status) == [200])
    }
}

@Suite("A download's identity")
struct IdentityTests {
    @Test("a signed URL refreshed between runs (?sig=A, then ?sig=B) continues the same download from its bytes")
    func refreshedURLContinues() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("s.bin", size: 3_000_000, seed: 43)
        let state = directory.appendingPathComponent("state")
        let destination = directory.appendingPathComponent("s.bin")
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        // The first run: 1 MiB at once, then slow; interrupted by its manager's shutdown.
        let kept = try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(from: server.url("gated/s.bin?sig=AAA"), to: destination)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 1_048_576 } else { false } }
            return download.id
        }
        #expect(kept == DownloadID(destination: destination))
        let partials = try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasSuffix(".part") }
        #expect(partials == ["\(kept).part"])
        let before = try #require(FilePath.fileLength(state.appendingPathComponent("\(kept).part").path))
        // The second run asks with a fresh signature. (It does not resume unfinished downloads by
        // itself: that would race the request, and continue with the old URL's signature.)
        configuration.resumesUnfinishedDownloads = false
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(from: server.url("s.bin?sig=BBB"), to: destination)
            #expect(download.id == kept)
            #expect(try await download.finished() == destination)
        }
        #expect(try Data(contentsOf: destination) == source)
        let fresh = server.accessLog().filter { $0.uri == "/s.bin?sig=BBB" }
        // One request, for the rest and the overlap before it (the URL changed), pinned by If-Range.
        #expect(fresh.count == 1 && fresh[0].status == 206 && fresh[0].ifRange != "-", "\(server.accessLog())")
        #expect(fresh[0].range == "bytes=\(before - 65_536)-", "\(fresh)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasSuffix(".part") }.isEmpty
        )
        #expect(
            try DownloadManager.journalEntries(stateDirectory: state).map(\.url) == [
                server.url("s.bin?sig=BBB").absoluteString
            ]
        )
    }

    @Test("the plan across URLs: a validator is not trusted alone, the overlap is checked too")
    func planAcrossURLs() {
        #expect(
            ResumePlan.decide(offset: 500_000, validator: "\"t\"", resumesWithoutValidator: false, urlChanged: true)
                == .verify(rangeStart: 500_000 - 65_536, offset: 500_000, ifRange: "\"t\"")
        )
        #expect(
            ResumePlan.decide(offset: 500_000, validator: nil, resumesWithoutValidator: false, urlChanged: true)
                == .restart(.noValidator)
        )
    }
}

@Suite("User agents")
struct UserAgentTests {
    @Test("a request's user agent is sent instead of the manager's, and recorded for a later process")
    func perRequest() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("u1.bin", size: 10_000, seed: 44)
        _ = try server.makeFile("u2.bin", size: 10_000, seed: 45)
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.maxConcurrentDownloads = 1  // one easy handle serves both, one after the other
        try await withDownloadManager(configuration: configuration) { manager in
            _ = try manager.enqueue([
                DownloadRequest(
                    url: server.url("u1.bin"),
                    destination: directory.appendingPathComponent("u1.bin"),
                    userAgent: "Custom/1.0"
                ),
                DownloadRequest(url: server.url("u2.bin"), destination: directory.appendingPathComponent("u2.bin")),
            ])
            await manager.waitUntilIdle()
        }
        let log = server.accessLog()
        #expect(log.first { $0.uri == "/u1.bin" }?.userAgent == "Custom/1.0")
        #expect(log.first { $0.uri == "/u2.bin" }?.userAgent == "Haul/\(DownloadManager.version)")
        let journal = try Journal(directory: directory.appendingPathComponent("state").path)
        defer { journal.close() }
        let recorded = try journal.record(for: DownloadID(destination: directory.appendingPathComponent("u1.bin")))
        #expect(recorded?.userAgent == "Custom/1.0")
    }
}

@Suite("Response metadata")
struct ResponseMetadataTests {
    @Test("a download tells the final URL after redirects, the Content-Type, the validators and the length")
    func metadata() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("m.bin", size: 123_456, seed: 46)
        _ = try server.makeFile("blocker.bin", size: 1024 * 1024 + 64 * 1024, seed: 47)
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.maxConcurrentDownloads = 1
        let response = try await withDownloadManager(configuration: configuration) { manager in
            // The one slot is held (/gated/: 1 MiB at once, then 1 KB/s): m.bin waits in the queue,
            // asked for nothing yet, however late this task runs.
            let blocker = try manager.download(
                from: server.url("gated/blocker.bin"),
                to: directory.appendingPathComponent("blocker.bin")
            )
            var events = blocker.events.makeAsyncIterator()
            await events.next { if case .receiving = $0 { true } else { false } }
            let download = try manager.download(
                from: server.url("redirect/m.bin"),
                to: directory.appendingPathComponent("m.bin")
            )
            #expect(download.response == nil)
            blocker.cancel()
            _ = try await download.finished()
            return download.response
        }
        let seen = try #require(response)
        #expect(seen.url == server.url("m.bin"))  // nginx's /redirect/ sent it there
        #expect(seen.status == 200 && seen.totalBytes == 123_456)
        #expect(seen.contentType == "text/plain")  // the test nginx has no mime.types: its default_type
        #expect(seen.entityTag?.hasPrefix("\"") == true && seen.lastModified?.hasSuffix("GMT") == true)
    }
}

@Suite("Journals beside many folders")
struct ManyFoldersTests {
    @Test("without a state directory, a journal whose downloads are all done is closed, and opens again when asked")
    func idleJournalsClose() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("f.bin", size: 2_000, seed: 47)
        let folders = (0..<200).map { directory.appendingPathComponent("folder-\($0)") }
        let configuration = DownloadManager.Configuration()  // a .haul beside each destination
        try await withDownloadManager(configuration: configuration) { manager in
            let summary = try manager.enqueue(
                folders.map {
                    DownloadRequest(url: server.url("f.bin"), destination: $0.appendingPathComponent("f.bin"))
                }
            )
            #expect(summary.queued == 200)
            await manager.waitUntilIdle()
            // 200 journals were opened; none is held now (each held 3 descriptors and its page cache).
            let held = Descriptors.files(in: directory.path).filter { $0.contains("/.haul/journal") }
            #expect(held.isEmpty, "\(held.count) journal files still open")
            // Asked for again, one opens its journal and finds the file complete.
            let again = try manager.download(from: server.url("f.bin"), to: folders[7].appendingPathComponent("f.bin"))
            #expect(try await again.finished() == folders[7].appendingPathComponent("f.bin"))
            #expect(again.wasAlreadyComplete)
        }
        for folder in folders { #expect(try Data(contentsOf: folder.appendingPathComponent("f.bin")) == source) }
        #expect(server.accessLog().filter { $0.uri == "/f.bin" }.count == 200)
    }
}

extension Journal {
    /// Queues `count` rows (`http://h/i` to `/tmp/i`, in that order), each shaped by `shape` first;
    /// their ids.
    fileprivate func queueRows(
        _ count: Int,
        _ shape: (Int, inout DownloadRecord) -> Void = { _, _ in }
    ) throws -> [DownloadID] {
        try (0..<count).map { index in
            let id = DownloadID(destinationPath: "/tmp/\(index)")
            var record = DownloadRecord(url: "http://h/\(index)", destination: "/tmp/\(index)")
            record.state = .queued
            record.queueSequence = Int64(index)
            shape(index, &record)
            try save(record, for: id)
            return id
        }
    }

    /// ``nextQueued(at:excludingHosts:limit:)``, recording a thrown error as the test's failure.
    fileprivate func nextQueuedOrFail(
        at now: Double,
        excludingHosts excludedHosts: Set<String> = [],
        limit: Int
    ) -> QueueHeads {
        do {
            return try nextQueued(at: now, excludingHosts: excludedHosts, limit: limit)
        } catch {
            Issue.record(error)
            return QueueHeads(changes: -1)
        }
    }
}
