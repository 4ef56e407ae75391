import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// A journal in memory (rows held in Swift) answers as the SQLite journal does: the same writes to
/// both, every answer compared.
@Suite("Journal in memory")
struct MemoryJournalTests {
    typealias Generator = RandomizedParserTests.Generator

    static let seed = UInt64(Date().timeIntervalSince1970)

    /// A row as the queue writes them: states reached through the row's machine, retries, hosts,
    /// priorities, names chosen in folders.
    func record(_ index: Int, sequence: Int64, _ random: inout Generator) -> JournalRow {
        var record = JournalRow(url: "http://h\(index % 3)/\(index)", destination: "/d/\(index)")
        record.host = "h\(index % 3):80"
        record.priority = Int.random(in: -1...1, using: &random)
        record.queueSequence = sequence
        record.bytesCommitted = Int64.random(in: 0...2, using: &random) * 1000
        record.bytesSynced = Int64.random(in: 0...1, using: &random) * 500
        record.attempts = Int.random(in: 0...1, using: &random)
        if Bool.random(using: &random) { record.totalBytes = 4000 }
        if Int.random(in: 0..<4, using: &random) == 0 {
            record.folder = "/d"
            record.destination = Bool.random(using: &random) ? "/d" : "/d/name\(index % 4)"
        }
        let events: [QueueEvent] = [
            .admitted, .retryScheduled(at: Double(Int.random(in: 1...20, using: &random)), error: "HTTP 503"),
            .paused, .interrupted, .completed, .failed(error: "HTTP 404"), .continued,
            .requested(sequence: sequence),
        ]
        for _ in 0..<Int.random(in: 0...3, using: &random) {
            _ = record.apply(events.randomElement(using: &random)!)
        }
        if Int.random(in: 0..<5, using: &random) == 0 {
            // A row stored queued with a retry time reads as waiting to retry (and the reverse).
            record.retryAt = Double(Int.random(in: 0...20, using: &random))
        }
        return record
    }

    @Test("random writes, claims and reads: the journal in memory answers as the SQLite one")
    func answersAsSQLite() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Journal(directory: directory.path)
        defer { file.close() }
        let memory = Journal(inMemory: ())
        defer { memory.close() }
        var random = Generator(seed: Self.seed)
        var sequence: Int64 = 0
        let ids = (0..<24).map { HaulValues.DownloadID(destinationPath: "/d/\($0)") }
        var claims = 0
        for step in 0..<3000 {
            let index = Int.random(in: 0..<ids.count, using: &random)
            let id = ids[index]
            let now = Double(Int.random(in: 0...25, using: &random))
            let context = Comment(rawValue: "seed \(Self.seed), step \(step)")
            switch Int.random(in: 0..<11, using: &random) {
            case 0, 1:
                sequence += 1
                let row = record(index, sequence: sequence, &random)
                try file.save(row, for: id)
                try memory.save(row, for: id)
            case 2:
                sequence += 1
                let row = record(index, sequence: sequence, &random)
                #expect(try file.insertIfAbsent(row, for: id) == memory.insertIfAbsent(row, for: id), context)
            case 3:
                sequence += 1
                let row = record(index, sequence: sequence, &random)
                try file.update(row, for: id)
                try memory.update(row, for: id)
            case 4:
                file.remove(id)
                memory.remove(id)
            case 5, 6:
                // The scheduler's way: heads read together, claimed one after another.
                let limit = Int.random(in: 1...4, using: &random)
                let excluded: Set<String> = Bool.random(using: &random) ? [] : ["h\(index % 3):80"]
                var fileHeads = try file.nextQueued(at: now, excludingHosts: excluded, limit: limit)
                var memoryHeads = try memory.nextQueued(at: now, excludingHosts: excluded, limit: limit)
                #expect(fileHeads.blocked == memoryHeads.blocked, context)
                #expect(fileHeads.mayHaveMore == memoryHeads.mayHaveMore, context)
                #expect(fileHeads.count == memoryHeads.count, context)
                var (fileChanges, memoryChanges) = (fileHeads.changes, memoryHeads.changes)
                while let fileHead = fileHeads.removeFirst(), let memoryHead = memoryHeads.removeFirst() {
                    #expect(fileHead.id == memoryHead.id && fileHead.record == memoryHead.record, context)
                    guard fileHead.id == memoryHead.id, Bool.random(using: &random) else { continue }
                    let fileClaim = try file.claim(fileHead, unchangedSince: &fileChanges)
                    let memoryClaim = try memory.claim(memoryHead, unchangedSince: &memoryChanges)
                    #expect(fileClaim == memoryClaim && fileClaim != nil, context)
                    claims += 1
                }
            case 7:
                let bytes = Int64(Int.random(in: 0...3, using: &random)) * 400
                try file.recordSynced(id, bytes: bytes)
                try memory.recordSynced(id, bytes: bytes)
            case 8:
                try file.requeueInterrupted()
                try memory.requeueInterrupted()
            case 9:
                let path = Bool.random(using: &random) ? "/d/name\(index % 4)" : "/d/\(index)"
                #expect(
                    try file.destinationIsTaken(path, except: id) == memory.destinationIsTaken(path, except: id),
                    context
                )
            default:
                let (fileStanding, memoryStanding) = (try file.standing(of: id), try memory.standing(of: id))
                #expect(fileStanding?.state == memoryStanding?.state, context)
                #expect((fileStanding?.owner == file.owner) == (memoryStanding?.owner == memory.owner), context)
                #expect(fileStanding?.bytesCommitted == memoryStanding?.bytesCommitted, context)
            }
            // After every step: each row, the counts and the next retry's time.
            #expect(try file.record(for: id) == memory.record(for: id), context)
            let counts = (try file.queueCounts(at: now), try memory.queueCounts(at: now))
            #expect(counts.0 == counts.1, context)
            #expect(try file.nextRetryTime(after: now) == memory.nextRetryTime(after: now), context)
            #expect(try file.hasUnfinishedRows() == memory.hasUnfinishedRows(), context)
        }
        let byID = { (rows: [(HaulValues.DownloadID, JournalRow)]) in rows.sorted { $0.0.rawValue < $1.0.rawValue }
        }
        let (fileRows, memoryRows) = (byID(try file.allRecords()), byID(try memory.allRecords()))
        #expect(fileRows.map(\.0) == memoryRows.map(\.0) && fileRows.map(\.1) == memoryRows.map(\.1))
        let unfinished = (byID(try file.unfinishedRecords()), byID(try memory.unfinishedRecords()))
        #expect(unfinished.0.map(\.0) == unfinished.1.map(\.0))
        // The run did claim rows and leave some (a generator that never reaches them tests nothing).
        #expect(claims > 50 && !fileRows.isEmpty, "seed \(Self.seed)")
    }

    @Test("a journal in memory: no folder, no partial file, nothing after it is closed")
    func closed() throws {
        let journal = Journal(inMemory: ())
        let id = HaulValues.DownloadID(destinationPath: "/d/0")
        try journal.save(JournalRow(url: "http://h/0", destination: "/d/0"), for: id)
        #expect(try journal.record(for: id)?.state == .queued)
        // Known by a key no state directory is, with no path to a partial file.
        #expect(journal.directory == Journal.inMemoryKey && !journal.directory.hasPrefix("/"))
        #expect(journal.partialPath(for: id) == nil)
        #expect(!FileManager.default.fileExists(atPath: Journal.inMemoryKey))
        journal.close()
        #expect(journal.isClosed)
        #expect(throws: HaulValues.DownloadError.self) { try journal.record(for: id) }
        #expect(throws: HaulValues.DownloadError.self) {
            try journal.save(JournalRow(url: "u", destination: "d"), for: id)
        }
    }
}

/// The blocks of bodies in memory: a caller's body goes back to the blocks kept when dropped, the
/// next body of about its size reuses it, and no more than the limit is kept.
@Suite("Blocks of bodies in memory")
struct BodyBlocksTests {
    @Test("a body's block is reused by the next body after its caller dropped it, up to the limit kept")
    func reusedUpToTheLimit() throws {
        let blocks = BodyBlocks(limit: 1024 * 1024)
        let first = try #require(malloc(64 * 1024))
        blocks.give(first, capacity: 64 * 1024)
        #expect(blocks.keptBytes == 64 * 1024)
        // Too small for it, or less than half of it: not that block.
        #expect(blocks.take(atLeast: 65 * 1024) == nil)
        #expect(blocks.take(atLeast: 16 * 1024) == nil)
        let reused = try #require(blocks.take(atLeast: 60 * 1024))
        #expect(reused.pointer == first && reused.capacity == 64 * 1024 && blocks.keptBytes == 0)
        free(reused.pointer)
        // A block over an eighth of the limit is freed, not kept; the kept bytes stay under the limit.
        blocks.give(try #require(malloc(256 * 1024)), capacity: 256 * 1024)
        #expect(blocks.keptBytes == 0)
        for _ in 0..<20 { blocks.give(try #require(malloc(128 * 1024)), capacity: 128 * 1024) }
        #expect(blocks.keptBytes == 1024 * 1024)
    }

    @Test("bodies collected one after another, each in a block the last one may have left: each whole and its own")
    func collectedBodies() throws {
        for round in 0..<3 {
            let collector = BodyCollector(maximum: 1 << 20)
            collector.expect(100_000)
            let body = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ round) }
            body.withUnsafeBytes { _ = collector.append($0) }
            let taken = collector.take()
            #expect(taken == Data(body))
        }
    }
}
