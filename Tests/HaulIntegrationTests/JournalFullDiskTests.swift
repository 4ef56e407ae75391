import Foundation
import Glibc
import Synchronization
import Testing

@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 74, item 1: the journal on a disk that fills. A turn whose commit fails leaves the rows
/// as they were before it (never ahead of the loop); the loop's next transaction writes that
/// turn's rows again before anything reads the queue in it, so once space returns the journal
/// says what the loop did. A journal dropped without `close()` does not crash.
@Suite("Journal on a full disk")
struct JournalFullDiskTests {
    @Test(
        "a turn whose commit fails is written again, first, by the next turn once there is space; meanwhile the rows are the older ones"
    )
    func lostTurnIsWrittenAgain() async throws {
        try await withSmallDisk(megabytes: 2) { disk in
            let directory = disk.appendingPathComponent("state").path
            let batch = WriteBatch()
            batch.attachCurrentThread()
            let journal = try Journal(directory: directory, batch: batch)
            let ids = (0..<40).map { HaulValues.DownloadID(destinationPath: "/tmp/full-\($0)") }
            var record = JournalRow(url: "http://h/a", destination: "/tmp/full-0")
            record.state = .paused
            record.bytesCommitted = 1
            try journal.save(record, for: ids[0])
            #expect(batch.commit().isEmpty)

            // The turn: the first row moves on, 39 rows are new (pages enough to need the disk).
            record.bytesCommitted = 2
            for id in ids {
                record.destination = "/tmp/\(id.rawValue)-" + String(repeating: "x", count: 400)
                try journal.save(record, for: id)
            }
            try fill(disk, leaving: 0)
            let failures = batch.commit()
            #expect(failures.count == 1 && failures.first?.1.errno == ENOSPC, "\(failures.map(\.1))")
            #expect(journal.lostCommit)
            // Read outside the loop's transaction: the row as the last commit left it.
            #expect(try journal.record(for: ids[0])?.bytesCommitted == 1)
            #expect(try journal.record(for: ids[1]) == nil)

            // Space again: the next turn's first read of the queue writes the lost turn again.
            try unfill(disk)
            _ = try journal.nextQueued(at: Date().timeIntervalSince1970, limit: 1)
            #expect(!journal.lostCommit)
            #expect(batch.commit().isEmpty)
            journal.close()

            let reopened = try Journal(directory: directory)
            defer { reopened.close() }
            let rows = try reopened.allRecords()
            #expect(rows.count == ids.count)
            #expect(rows.allSatisfy { $0.1.bytesCommitted == 2 && $0.1.state == .paused })
        }
    }

    @Test("the turn's rows survive a write that SQLite answered by rolling the whole transaction back")
    func rolledBackTurnIsWrittenAgain() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let batch = WriteBatch()
        batch.attachCurrentThread()
        let journal = try Journal(directory: directory.path, batch: batch)
        let first = HaulValues.DownloadID(destinationPath: "/tmp/rolled-1")
        let second = HaulValues.DownloadID(destinationPath: "/tmp/rolled-2")
        let record = JournalRow(url: "http://h/a", destination: "/tmp/rolled-1")
        try journal.save(record, for: first)
        // As SQLite does after a full disk or an I/O error inside a transaction: it is gone.
        try journal.confined { () throws(HaulValues.DownloadError) in try journal.execute("ROLLBACK") }
        #expect(throws: HaulValues.DownloadError.self) {
            try journal.writing { () throws(HaulValues.DownloadError) in
                throw HaulValues.DownloadError(code: .fileSystem, url: nil, errno: ENOSPC, detail: "disk full")
            }
        }
        #expect(journal.lostCommit && !journal.batchOpen)
        try journal.save(record, for: second)  // a new transaction: the first row again, then this one
        #expect(batch.commit().first?.1.errno == ENOSPC)  // the turn reports the rollback once
        #expect(batch.commit().isEmpty)
        journal.close()
        let reopened = try Journal(directory: directory.path)
        defer { reopened.close() }
        #expect(try Set(reopened.allRecords().map(\.0)) == [first, second])
    }

    @Test(
        "a disk lane's placings written in the loop's turn are answered after its commit, or with the commit's error on a full disk, never before"
    )
    func placingsAnsweredAfterTheCommit() async throws {
        try await withSmallDisk(megabytes: 2) { disk in
            let batch = WriteBatch()
            batch.attachCurrentThread()
            let journal = try Journal(directory: disk.appendingPathComponent("state").path, batch: batch)
            defer { journal.close() }
            let ids = (0..<40).map { HaulValues.DownloadID(destinationPath: "/tmp/placing-\($0)") }
            for id in ids {
                let destination = "/tmp/\(id.rawValue)-" + String(repeating: "p", count: 400)
                try journal.save(JournalRow(url: "http://h/a", destination: destination), for: id)
            }
            #expect(batch.commit().isEmpty)
            let answers = Mutex<[String]>([])
            func answer(_ name: String) -> @Sendable (HaulValues.DownloadError?) -> Void {
                { error in answers.withLock { $0.append("\(name): \(error.map { "\($0.errno ?? 0)" } ?? "ok")") } }
            }

            journal.recordPlacingsInTurn([(ids[0], "one")], answer: answer("first"))
            #expect(answers.withLock { $0 }.isEmpty)  // not before the commit
            #expect(batch.commit().isEmpty)
            #expect(answers.withLock { $0 } == ["first: ok"])
            #expect(try journal.record(for: ids[0])?.placing == "one")

            // A turn whose commit the full disk refuses: the lane hears why, and nothing is recorded.
            let long = String(repeating: "i", count: 2_000)
            journal.recordPlacingsInTurn(ids.dropFirst().map { ($0, long) }, answer: answer("second"))
            try fill(disk, leaving: 0)
            let failures = batch.commit()
            #expect(failures.first?.1.errno == ENOSPC, "\(failures.map(\.1))")
            #expect(answers.withLock { $0 } == ["first: ok", "second: \(ENOSPC)"])
            #expect(try journal.record(for: ids[1])?.placing == nil)
            try unfill(disk)
        }
    }

    @Test(
        "a journal dropped without close() beside partial files it found no rows for removes them, and does not crash"
    )
    func droppedJournalWithOrphans() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let orphan = directory.appendingPathComponent("0123456789abcdef0123456789abcdef.part")
        try Data(repeating: 7, count: 1000).write(to: orphan)
        do {
            // Before: "Attempted to read an unowned reference but object … was already destroyed".
            let journal = try Journal(directory: directory.path)
            #expect(journal.orphanPartials.count == 1)
        }
        #expect(!FileManager.default.fileExists(atPath: orphan.path))
    }
}
