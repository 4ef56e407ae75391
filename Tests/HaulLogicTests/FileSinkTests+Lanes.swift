import CHaul
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// The disk lanes and the buffer pool: batches synced together, files placed whole, buffers freed.
extension FileSinkTests {
    @Test("a batch of finished files is synced together: each placed whole, in order, a failed one alone failing")
    func batchSyncedTogether() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let pool = BufferPool(bufferSize: 64 * 1024, idleLimit: 8)
        var jobs: [DiskJob] = []
        var expected: [String: [UInt8]] = [:]
        for index in 0..<6 {
            let data = bytes(10_000 + index * 1000, seed: index + 1)
            let partial = directory.appendingPathComponent("\(index).part").path
            let sink = try FileSink(path: partial, pool: pool, startsEmpty: true)
            sink.collectsWholeRest()
            _ = data.withUnsafeBytes { try? sink.append($0, now: 1) }
            let destination = directory.appendingPathComponent("\(index).bin").path
            // The third expects another length: it alone fails, and nothing of it is placed.
            let size: Int64? = index == 2 ? 1 : nil
            jobs.append(
                .finish(
                    FinishJob(
                        id: HaulValues.DownloadID(rawValue: "\(index)"),
                        partialPath: partial,
                        destination: destination,
                        remainder: sink.handOff(),
                        writeWhole: true,
                        keepDestination: false,
                        expectedSize: size,
                        expectedChecksum: nil,
                        url: "http://h/\(index).bin"
                    )
                )
            )
            if index != 2 { expected[destination] = data }
        }
        // A checkpoint of a partial file rides along.
        let partial = directory.appendingPathComponent("open.part").path
        #expect(FileManager.default.createFile(atPath: partial, contents: Data(bytes(5000, seed: 9))))
        jobs.append(
            .checkpoint(HaulValues.DownloadID(rawValue: "open"), directory: directory.path, path: partial, bytes: 5000)
        )
        let results = DiskJob.perform(jobs)
        #expect(results.count == jobs.count)
        for (index, result) in results.enumerated() {
            switch result {
            case .placed(let id, let outcome):
                #expect(id.rawValue == "\(index)")
                if index == 2 {
                    guard case .failure(let error) = outcome else {
                        Issue.record("a file of the wrong length was placed")
                        continue
                    }
                    #expect(error.code == .checksumMismatch)
                } else {
                    guard case .success = outcome else {
                        Issue.record("file \(index) was not placed: \(outcome)")
                        continue
                    }
                }
            case .synced(let id, _, let synced, _):
                #expect(id.rawValue == "open" && synced == 5000)
            }
        }
        for (path, data) in expected { #expect(contents(path) == data) }
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("2.bin").path))
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("2.part").path))
        // Nothing half-named is left: the whole files were named only once synced, then moved.
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(left == ["0.bin", "1.bin", "3.bin", "4.bin", "5.bin", "open.part"], "\(left)")
    }

    @Test("a whole file is linked straight at its destination: one name, no partial left, nothing replaced in part")
    func wholeFileLinkedAtDestination() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = directory.appendingPathComponent(".haul").path
        #expect(FilePath.makeDirectories(state) == nil)
        let pool = BufferPool(bufferSize: 64 * 1024, idleLimit: 4)
        func finish(
            _ name: String,
            _ data: [UInt8],
            truncatingOlderPartial: Bool = false,
            replaces: FinishJob.Replacement = .any
        ) throws -> Result<PlacedFile, HaulValues.DownloadError> {
            let partial = "\(state)/\(name).part"
            let sink = try FileSink(path: partial, pool: pool, startsEmpty: !truncatingOlderPartial)
            if truncatingOlderPartial { try sink.truncate() }  // a restart from zero over an older partial
            #expect(try append(data, to: sink, at: 1) == false)
            var job = FinishJob(
                id: HaulValues.DownloadID(rawValue: name),
                partialPath: partial,
                destination: directory.appendingPathComponent(name).path,
                remainder: sink.handOff(),
                writeWhole: true,
                keepDestination: false,
                expectedSize: Int64(data.count),
                expectedChecksum: nil,
                url: "http://h/\(name)"
            )
            job.replaces = replaces
            return job.perform()
        }
        func links(_ path: String) -> Int {
            var status = stat()
            return stat(path, &status) == 0 ? Int(status.st_nlink) : 0
        }

        // Nothing at the destination: the file appears there, whole, with one name (none left in
        // the state directory), and the placed length and time are the destination's.
        let fresh = bytes(40 * 1024, seed: 41)
        let placed = try finish("fresh.bin", fresh).get()
        let freshPath = directory.appendingPathComponent("fresh.bin").path
        #expect(contents(freshPath) == fresh)
        #expect(links(freshPath) == 1)
        #expect(placed.path == nil)
        #expect(placed == PlacedFile.at(freshPath))

        // An older partial this download started over from: gone once the new file is placed.
        let older = "\(state)/restarted.bin.part"
        #expect(FileManager.default.createFile(atPath: older, contents: Data(repeating: 0xEE, count: 100_000)))
        let restarted = bytes(30 * 1024, seed: 42)
        _ = try finish("restarted.bin", restarted, truncatingOlderPartial: true).get()
        #expect(contents(directory.appendingPathComponent("restarted.bin").path) == restarted)
        #expect(!FileManager.default.fileExists(atPath: older))

        // A file already at the destination of a download to that file: replaced whole (renamed
        // over, as before), never written into.
        let taken = directory.appendingPathComponent("taken.bin").path
        #expect(FileManager.default.createFile(atPath: taken, contents: Data(repeating: 0xAB, count: 90_000)))
        let replacing = bytes(20 * 1024, seed: 43)
        _ = try finish("taken.bin", replacing).get()
        #expect(contents(taken) == replacing)
        #expect(links(taken) == 1)

        // A download into a folder never replaces a file that is not its own: it takes the next name.
        let mine = bytes(10 * 1024, seed: 44)
        let beside = try finish("taken.bin", mine, replaces: .ownOnly(placedModificationTime: nil)).get()
        #expect(contents(taken) == replacing)
        let besidePath = try #require(beside.path)
        #expect(besidePath != taken)
        #expect(contents(besidePath) == mine)

        // A wrong length fails before anything is named.
        var wrong = FinishJob(
            id: HaulValues.DownloadID(rawValue: "wrong"),
            partialPath: "\(state)/wrong.part",
            destination: directory.appendingPathComponent("wrong.bin").path,
            remainder: try {
                let sink = try FileSink(path: "\(state)/wrong.part", pool: pool, startsEmpty: true)
                #expect(try append(bytes(20 * 1024, seed: 45), to: sink, at: 1) == false)
                return sink.handOff()
            }(),
            writeWhole: true,
            keepDestination: false,
            expectedSize: 20 * 1024 - 1,
            expectedChecksum: nil,
            url: "http://h/wrong.bin"
        )
        wrong.replaces = .any
        guard case .failure(let error) = wrong.perform() else {
            Issue.record("a file of the wrong length was placed")
            return
        }
        #expect(error.code == .checksumMismatch)
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        let placedNames = [".haul", "fresh.bin", "restarted.bin", "taken.bin", FilePath.lastComponent(of: besidePath)]
        #expect(left == placedNames.sorted())
        #expect(try FileManager.default.contentsOfDirectory(atPath: state).isEmpty)
        #expect(pool.inUseCount == 0)
    }

    @Test("a partial file deleted before it is moved into place fails the download; it is never reported complete")
    func partialDeletedBeforeFinish() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let partial = directory.appendingPathComponent("gone.part").path
        let destination = directory.appendingPathComponent("x.bin").path
        let job = FinishJob(
            id: HaulValues.DownloadID(rawValue: "gone"),
            partialPath: partial,
            destination: destination,
            remainder: nil,
            writeWhole: false,
            keepDestination: false,
            expectedSize: nil,
            expectedChecksum: nil,
            url: "http://h/x.bin"
        )
        guard case .failure(let error) = job.perform() else {
            Issue.record("a missing partial file and no destination were reported complete")
            return
        }
        #expect(
            error.code == .fileSystem && error.errno == ENOENT && error.path == partial && error.url == "http://h/x.bin"
        )
        #expect(
            error.description.contains("deleted before it could be moved into place")
                && !error.description.contains("is kept")
        )
        #expect(
            error.description.hasSuffix(
                "Keep the state directory while downloads run; the download starts again from zero."
            )
        )
        // An earlier run that moved the file into place before it could record that: the file counts.
        #expect(FileManager.default.createFile(atPath: destination, contents: Data(bytes(1234, seed: 3))))
        guard case .success(let placed) = job.perform() else {
            Issue.record("a file already in place was not accepted")
            return
        }
        #expect(placed.length == 1234)
        // Renaming a partial that vanished names the partial, not the destination.
        #expect {
            try FinishJob.moveIntoPlace(from: partial, to: directory.appendingPathComponent("y.bin").path)
        } throws: { error in
            (error as? HaulValues.DownloadError)?.path == partial
                && (error as? HaulValues.DownloadError)?.errno == ENOENT
        }
    }

    @Test("disk jobs use one lane while their syncs are fast and every lane once they wait on a disk")
    func diskLanesFollowSyncTime() {
        let timing = DiskTiming()
        #expect(timing.lanes(of: 8) == 1)
        timing.record(syncNanoseconds: 10 * 1_000)  // tmpfs: ten no-op syncs of a microsecond
        #expect(timing.lanes(of: 8) == 1)
        for _ in 0..<4 { timing.record(syncNanoseconds: 600_000) }  // a disk's sync: 0.6 ms
        #expect(timing.lanes(of: 8) == 8)
        for _ in 0..<8 { timing.record(syncNanoseconds: 20_000) }  // fast again
        #expect(timing.lanes(of: 8) == 1)
    }

    @Test("a batch's sync time counts its syncs: none where every job ended without one")
    func syncClockCountsOnlySyncs() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var clock = SyncClock()
        #expect(clock.timed { 7 } == 7)
        let timedNothing = clock.nanoseconds
        // A job whose destination is kept ends before any sync: the clock does not move.
        let destination = directory.appendingPathComponent("kept.bin").path
        #expect(FileManager.default.createFile(atPath: destination, contents: Data([1, 2, 3])))
        let kept = FinishJob(
            id: HaulValues.DownloadID(destinationPath: destination),
            partialPath: directory.appendingPathComponent("kept.part").path,
            destination: destination,
            remainder: nil,
            writeWhole: false,
            keepDestination: true,
            expectedSize: nil,
            expectedChecksum: nil,
            url: "http://h/kept",
            modificationTime: nil
        )
        let results = DiskJob.perform([.finish(kept)], clock: &clock)
        guard case .placed(_, .success(let placed)) = results.first else {
            Issue.record("kept: \(results)")
            return
        }
        #expect(placed.length == 3)
        #expect(clock.nanoseconds == timedNothing)
        // A checkpoint syncs its partial file: the clock moves.
        let partial = directory.appendingPathComponent("p.part").path
        #expect(FileManager.default.createFile(atPath: partial, contents: Data(repeating: 9, count: 10)))
        let synced = DiskJob.perform(
            [
                .checkpoint(
                    HaulValues.DownloadID(destinationPath: partial),
                    directory: directory.path,
                    path: partial,
                    bytes: 10
                )
            ],
            clock: &clock
        )
        guard case .synced(_, _, let bytes, _) = synced.first else {
            Issue.record("checkpoint: \(synced)")
            return
        }
        #expect(bytes == 10)
        #expect(clock.nanoseconds > timedNothing)
    }

    @Test("the pool keeps buffers given back and frees only those idle for a whole trim period")
    func poolFreesBuffersIdleForAPeriod() throws {
        let pool = BufferPool(bufferSize: 64 * 1024, idleLimit: 8)
        let burst = try (0..<5).map { _ in try #require(pool.take()) }
        for buffer in burst { pool.give(buffer) }
        #expect(pool.idleCount == 5)
        // Given back during this period: none was idle all along.
        #expect(pool.trim() == 0)
        #expect(pool.idleCount == 5)
        // Two were taken (and given back) in the next period: three were never needed.
        let first = try #require(pool.take())
        let second = try #require(pool.take())
        #expect(burst.contains { $0.baseAddress == first.baseAddress })  // reused, not mapped
        pool.give(second)
        pool.give(first)
        #expect(pool.trim() == 3)
        #expect(pool.idleCount == 2)
        // The two kept are the ones just used; then a period without takes frees them too.
        let again = try #require(pool.take())
        #expect(again.baseAddress == first.baseAddress)
        pool.give(again)
        #expect(pool.trim() == 1)
        #expect(pool.trim() == 1)
        #expect(pool.idleCount == 0)
        // Beyond the idle limit, a buffer given back is freed at once.
        let many = try (0..<10).map { _ in try #require(pool.take()) }
        for buffer in many { pool.give(buffer) }
        #expect(pool.idleCount == 8)
    }

    @Test("small chunks go straight to the file; a large chunk or many bytes quickly start buffering")
    func slowChunksWriteThrough() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("b.part").path
        let size = 64 * 1024
        let sink = try FileSink(path: path, pool: BufferPool(bufferSize: size, idleLimit: 4))
        var expected: [UInt8] = []
        let step = FileSink.idleAge / 4

        // A trickle: every chunk is written at once, and no buffer is taken.
        for index in 0..<8 {
            let chunk = bytes(2000, seed: index)
            expected += chunk
            #expect(try append(chunk, to: sink, at: UInt64(index) * step) == true)
            #expect(sink.writesThrough)
        }
        #expect(sink.committedLength == Int64(expected.count))
        #expect(try sink.releaseIfIdle(now: 100 * step) == false)  // no buffer to give back

        // Small chunks adding up to fastBytes within idleAge: the next ones are buffered.
        let base = 200 * step
        for index in 0..<(sink.fastBytes / 2048) {
            let chunk = bytes(2048, seed: 100 + index)
            expected += chunk
            #expect(try append(chunk, to: sink, at: base + UInt64(index)) == true)
        }
        #expect(!sink.writesThrough)
        let tail = bytes(100, seed: 7)
        expected += tail
        #expect(try append(tail, to: sink, at: base + 100) == false)
        #expect(sink.receivedLength == sink.committedLength + 100)
        #expect(contents(path)?.count == expected.count - 100)

        try sink.close()
        #expect(contents(path) == expected)
    }

    @Test("a buffer left unfilled is written out and given back; the sink then writes through")
    func idleBufferIsReleased() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("c.part").path
        let size = 64 * 1024
        let sink = try FileSink(path: path, pool: BufferPool(bufferSize: size, idleLimit: 4))
        let age = FileSink.idleAge
        var expected: [UInt8] = []

        let large = bytes(FileSink.largeChunk, seed: 1)  // fast: buffered
        expected += large
        #expect(try append(large, to: sink, at: 0) == false)
        #expect(!sink.writesThrough)
        #expect(try sink.releaseIfIdle(now: age - 1) == false)  // not idle long enough
        #expect(sink.committedLength == 0)
        #expect(try sink.releaseIfIdle(now: age) == true)
        #expect(sink.writesThrough)
        #expect(sink.committedLength == Int64(large.count))
        #expect(contents(path) == expected)

        let small = bytes(500, seed: 2)
        expected += small
        #expect(try append(small, to: sink, at: age + 1) == true)
        #expect(sink.committedLength == Int64(expected.count))
        try sink.close()
        #expect(contents(path) == expected)
    }

    @Test("a buffer released to a full disk reports the write error and its path")
    func releaseToFullDiskFails() async throws {
        try await withSmallDisk(megabytes: 1) { directory in
            try fill(directory, leaving: 0)
            let path = directory.appendingPathComponent("d.part").path
            let sink = try FileSink(path: path, pool: BufferPool(bufferSize: 64 * 1024, idleLimit: 1))
            #expect(try append(bytes(FileSink.largeChunk, seed: 5), to: sink, at: 0) == false)
            #expect { try sink.releaseIfIdle(now: FileSink.idleAge) } throws: { error in
                guard let error = error as? HaulValues.DownloadError else { return false }
                return error.code == .fileSystem && error.errno == ENOSPC && error.path == path
            }
        }
    }
}
