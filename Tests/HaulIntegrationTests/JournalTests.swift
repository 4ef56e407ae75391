import Foundation
import Synchronization
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

@Suite("Journal")
struct JournalTests {
    @Test func recordsRoundTripAndMigrateOnReopen() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let id = HaulValues.DownloadID(destinationPath: "/tmp/a")
        var record = JournalRow(url: "http://h/a", destination: "/tmp/a")
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
        let (a, b) = (
            HaulValues.DownloadID(destinationPath: "/tmp/a"), HaulValues.DownloadID(destinationPath: "/tmp/b")
        )
        func queued(_ name: String) -> JournalRow {
            var record = JournalRow(url: "http://h/\(name)", destination: "/tmp/\(name)")
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
        let ids = (0..<3).map { HaulValues.DownloadID(destinationPath: "/tmp/\($0)") }
        let record = JournalRow(url: "http://h/0", destination: "/tmp/0")
        do {
            let journal = try Journal(directory: directory.path, batch: batch)
            try journal.save(record, for: ids[0])
            #expect(try journal.record(for: ids[0]) == record)  // visible inside the turn
            #expect {
                try journal.transaction { () throws(HaulValues.DownloadError) in
                    try journal.save(record, for: ids[1])
                    throw HaulValues.DownloadError(code: .journal, url: nil, detail: "abandoned")
                }
            } throws: { ($0 as? HaulValues.DownloadError)?.detail == "abandoned" }
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

    @Test(
        "callers' rows written by the loop in one transaction of their own: the open batch commits first, a savepoint that fails undoes its own rows alone"
    )
    func ownTransactionWithSavepoints() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let batch = WriteBatch()
        batch.attachCurrentThread()
        let journal = try Journal(directory: directory.path, batch: batch)
        let ids = ["loop", "first", "failed", "third"].map { HaulValues.DownloadID(destinationPath: "/tmp/own-\($0)") }
        let record = JournalRow(url: "http://h/x", destination: "/tmp/x")
        try journal.save(record, for: ids[0])  // the loop's turn: its batch is open
        #expect(journal.batchOpen)
        try journal.transactionOfItsOwn { () throws(HaulValues.DownloadError) in
            #expect(!journal.batchOpen && journal.ownTransactionOpen)
            try journal.savepoint { () throws(HaulValues.DownloadError) in try journal.save(record, for: ids[1]) }
            #expect(throws: HaulValues.DownloadError.self) {
                try journal.savepoint { () throws(HaulValues.DownloadError) in
                    try journal.save(record, for: ids[2])
                    throw HaulValues.DownloadError(code: .journal, url: nil, detail: "refused")
                }
            }
            #expect(journal.isInTransaction)
            try journal.savepoint { () throws(HaulValues.DownloadError) in try journal.save(record, for: ids[3]) }
        }
        #expect(!journal.isInTransaction && !journal.batchOpen)
        // Durable now, read from another connection: the loop's row, and the callers' but the undone one.
        let reader = try Journal(directory: directory.path)
        #expect(try Set(reader.allRecords().map(\.0)) == [ids[0], ids[1], ids[3]])
        reader.close()
        #expect(batch.commit().isEmpty)
        journal.close()
    }

    @Test("a journal counts the calls made off its running loop (debug builds), and not its opening")
    func offLoopCallsAreCounted() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let batch = WriteBatch()
        batch.attachCurrentThread()  // this thread is the loop
        let journal = try Journal(directory: directory.path, batch: batch)
        let record = JournalRow(url: "http://h/x", destination: "/tmp/x")
        try journal.save(record, for: HaulValues.DownloadID(destinationPath: "/tmp/loop"))
        #expect(batch.commit().isEmpty)
        #expect(journal.offLoopEntries == 0)
        // Another thread, between turns: no two threads at once, but not the loop.
        let done = DispatchSemaphore(value: 0)
        let other = Thread {
            _ = try? journal.record(for: HaulValues.DownloadID(destinationPath: "/tmp/loop"))
            done.signal()
        }
        other.start()
        done.wait()
        #if DEBUG
            #expect(journal.offLoopEntries == 1)
        #endif
        journal.close()
    }

    @Test(
        "a running manager's journals are its loop's alone: downloads, controls, listings and looks make no call off it"
    )
    func runningManagersJournalStaysOnItsLoop() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let body = try server.makeFile("confined.bin", size: 200_000, seed: 3)
        var configuration = DownloadManager.Configuration.forTests()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.maxConcurrentDownloads = 2
        let manager = try DownloadManager(configuration: configuration)
        let requests = (0..<6).map {
            DownloadRequest(url: server.url("confined.bin"), destination: directory.appendingPathComponent("f\($0)"))
        }
        #expect(try manager.enqueue(requests).queued == 6)
        let other = try manager.download(
            from: server.url("confined.bin"),
            to: directory.appendingPathComponent("g")
        )
        await other.pause()
        _ = manager.downloads
        _ = manager.journalEntry(id: other.id)
        _ = manager.download(id: other.id)
        await other.resume()
        for request in requests { _ = try await manager.download(request).finished() }
        #expect(try Data(contentsOf: try await other.finished()) == body)
        _ = try manager.journalRows(in: directory.appendingPathComponent("state"))
        #expect(manager.holdings.journalOffLoopEntries == 0)
        await manager.shutdown()
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
        let ids = ["a", "b", "c"].map { HaulValues.DownloadID(destinationPath: "/tmp/\($0)") }
        #expect(try Set(journal.allRecords().map(\.0)) == Set(ids))
        #expect(journal.partialPath(for: ids[1]).flatMap(FilePath.fileLength) == 300)
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
            ($0 as? HaulValues.DownloadError)?.code == .journalLocked
        }
        let a = HaulValues.DownloadID(destinationPath: "/tmp/a")
        let b = HaulValues.DownloadID(destinationPath: "/tmp/b")
        try first.save(JournalRow(url: "http://h/a", destination: "/tmp/a"), for: a)
        try second.save(JournalRow(url: "http://h/b", destination: "/tmp/b"), for: b)
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
        #expect(try Journal.entries(directory: directory.path).first { $0.id == b }?.record.state == .interrupted)
        #expect(
            try first.transaction { () throws(HaulValues.DownloadError) in try first.releaseRowsOfGoneOwners() } == 1
        )
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
            guard let error = error as? HaulValues.DownloadError else { return false }
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
            guard let error = error as? HaulValues.DownloadError else { return false }
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
            guard let error = error as? HaulValues.DownloadError else { return false }
            return error.code == .journal && error.description.contains("newer Haul")
        }
    }
}

extension Journal {
    /// Queues `count` rows (`http://h/i` to `/tmp/i`, in that order), each shaped by `shape` first;
    /// their ids.
    fileprivate func queueRows(
        _ count: Int,
        _ shape: (Int, inout JournalRow) -> Void = { _, _ in }
    ) throws -> [HaulValues.DownloadID] {
        try (0..<count).map { index in
            let id = HaulValues.DownloadID(destinationPath: "/tmp/\(index)")
            var record = JournalRow(url: "http://h/\(index)", destination: "/tmp/\(index)")
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
    ) -> QueuedRows {
        do {
            return try nextQueued(at: now, excludingHosts: excludedHosts, limit: limit)
        } catch {
            Issue.record(error)
            return QueuedRows(changes: -1)
        }
    }
}
