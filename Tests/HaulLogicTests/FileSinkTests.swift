import CHaul
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulScheduler
@testable import HaulTestSupport
@testable import HaulValues

/// The partial file's writer, driven with explicit times: no clock, no sleeps.
@Suite("FileSink")
struct FileSinkTests {
    /// Deterministic bytes: `count` of them starting at `seed`.
    func bytes(_ count: Int, seed: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31) &+ seed) }
    }

    func append(_ chunk: [UInt8], to sink: FileSink, at now: UInt64) throws -> Bool {
        try chunk.withUnsafeBytes { try sink.append($0, now: now) }
    }

    func contents(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { [UInt8]($0) }
    }

    @Test("a download that fits in its buffer never opens its file: the finish job writes it whole")
    func smallFileIsHandedOff() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("a.part").path
        let pool = BufferPool(bufferSize: 64 * 1024, idleLimit: 4)
        let sink = try FileSink(path: path, pool: pool)
        let chunks = (0..<3).map { bytes(16 * 1024, seed: $0) }
        for chunk in chunks {
            #expect(try append(chunk, to: sink, at: 1) == false)
        }
        #expect(sink.committedLength == 0)
        #expect(sink.receivedLength == 48 * 1024)
        #expect(!FileManager.default.fileExists(atPath: path))

        let remainder = sink.handOff()
        let descriptor = try remainder.write(to: path)
        close(descriptor)
        #expect(contents(path) == chunks.flatMap { $0 })
        // The buffer went back to the pool: the next take reuses it rather than mapping another.
        let reused = try #require(pool.take())
        #expect(reused.baseAddress == remainder.buffer?.baseAddress)
        pool.give(reused)
    }

    @Test("the pool lends at most its limit; past it a fast sink writes each chunk straight to its file")
    func bufferLimit() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let pool = BufferPool(bufferSize: 64 * 1024, idleLimit: 4, limit: 1)
        let paths = ["a", "b"].map { directory.appendingPathComponent("\($0).part").path }
        let first = try FileSink(path: paths[0], pool: pool)
        let second = try FileSink(path: paths[1], pool: pool)
        let chunks = (0..<4).map { bytes(16 * 1024, seed: 20 + $0) }
        // The first sink holds the only buffer; the second finds none and writes through.
        #expect(try append(chunks[0], to: first, at: 1) == false)
        #expect(pool.inUseCount == 1)
        #expect(try append(chunks[1], to: second, at: 1) == true)
        #expect(second.committedLength == Int64(chunks[1].count) && second.bufferedCount == 0)
        #expect(try append(chunks[2], to: second, at: 2) == true)
        #expect(pool.inUseCount == 1 && pool.peakInUseCount == 1)
        // Once the first gives its buffer back, the second buffers again.
        try first.close()
        #expect(pool.inUseCount == 0)
        #expect(try append(chunks[3], to: second, at: 3) == false)
        try second.close()
        #expect(contents(paths[0]) == chunks[0])
        #expect(contents(paths[1]) == chunks[1] + chunks[2] + chunks[3])
        #expect(pool.inUseCount == 0)
        // A copy that cannot wait may go past the limit.
        let held = try #require(pool.take())
        #expect(pool.take() == nil)
        let extra = try #require(pool.take(beyondLimit: true))
        #expect(pool.peakInUseCount == 2)
        pool.give(extra)
        pool.give(held)
        #expect(pool.inUseCount == 0)
    }

    @Test("a whole remainder written nameless early frees its buffer, and is named whole later")
    func namelessRemainder() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("n.part").path
        let pool = BufferPool(bufferSize: 64 * 1024, idleLimit: 4)
        let sink = try FileSink(path: path, pool: pool)
        let chunk = bytes(40 * 1024, seed: 30)
        #expect(try append(chunk, to: sink, at: 1) == false)
        let written = try #require(sink.handOff().writtenNameless(in: directory.path))
        // The bytes are in a file with no name, the buffer is back, nothing is visible yet.
        #expect(pool.inUseCount == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        close(try written.writeWhole(to: path))
        #expect(contents(path) == chunk)
        // Where it cannot be named (here: a missing folder), the bytes are read back for a named
        // file, which fails the same way: a typed error naming the path, and no buffer kept.
        let other = try FileSink(path: "\(path).other", pool: pool)
        #expect(try append(chunk, to: other, at: 1) == false)
        let unnamed = try #require(other.handOff().writtenNameless(in: directory.path))
        #expect(throws: HaulValues.DownloadError.self) {
            try unnamed.writeWhole(to: directory.appendingPathComponent("missing/x.part").path)
        }
        #expect(pool.inUseCount == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["n.part"])
    }

    @Test("a nameless file is named through its descriptor or through /proc; a taken name or missing folder is refused")
    func namelessFilesAreLinked() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let ways: [(String, (Int32, UnsafePointer<CChar>) -> Int32)] = [
            ("directly", CHaul_link_nameless_directly),
            ("through-proc", CHaul_link_nameless_through_proc),
            ("either", CHaul_link_nameless),
        ]
        for (name, link) in ways {
            let descriptor = PartialRemainder.openNameless(in: directory.path)
            try #require(descriptor >= 0)
            defer { close(descriptor) }
            let data = bytes(5000, seed: name.count)
            #expect(data.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) } == data.count)
            let path = directory.appendingPathComponent(name).path
            let linked = link(descriptor, path)
            if name == "directly", linked != 0 {
                // Refused only for want of CAP_DAC_READ_SEARCH (not root): CHaul_link_nameless then
                // goes through /proc.
                #expect(geteuid() != 0 && (errno == ENOENT || errno == EPERM), "errno \(errno)")
                continue
            }
            #expect(linked == 0, "\(name): errno \(errno)")
            #expect(contents(path) == data, "\(name)")
            #expect(link(descriptor, path) == -1 && errno == EEXIST, "\(name)")
            let missing = directory.appendingPathComponent("missing/\(name)").path
            #expect(link(descriptor, missing) == -1 && errno == ENOENT, "\(name)")
        }
        // Where the direct way is refused (a kernel before 6.10, no privilege), the link goes
        // through /proc, and from then on straight there.
        var refused: Int32 = 0
        let descriptor = PartialRemainder.openNameless(in: directory.path)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let refusing: @convention(c) (Int32, UnsafePointer<CChar>?) -> Int32 = { _, _ in
            refusals.add(1, ordering: .relaxed)
            errno = ENOENT
            return -1
        }
        let path = directory.appendingPathComponent("refused").path
        #expect(CHaul_link_nameless_remembering(descriptor, path, refusing, &refused) == 0)
        #expect(refused == 1 && refusals.load(ordering: .relaxed) == 1)
        #expect(FileManager.default.fileExists(atPath: path))
        #expect(CHaul_link_nameless_remembering(descriptor, path + ".2", refusing, &refused) == 0)
        #expect(refusals.load(ordering: .relaxed) == 1)  // not asked again
        // A missing folder fails both ways and is not taken for a refusal.
        var notRefused: Int32 = 0
        let missing = directory.appendingPathComponent("missing/x").path
        #expect(CHaul_link_nameless_remembering(descriptor, missing, CHaul_link_nameless_directly, &notRefused) == -1)
        #expect(errno == ENOENT && notRefused == 0)
    }

    @Test("a whole file that cannot be written fails with its errno and does not claim a partial file is kept")
    func wholeFileToFullDisk() async throws {
        try await withSmallDisk(megabytes: 1) { directory in
            try fill(directory, leaving: 0)
            let path = directory.appendingPathComponent("w.part").path
            // The named route writes "w.part.whole" first, on a full disk.
            let pool = BufferPool(bufferSize: 64 * 1024, idleLimit: 1)
            let sink = try FileSink(path: path, pool: pool)
            #expect(try append(bytes(40 * 1024, seed: 7), to: sink, at: 1) == false)  // fast: buffered
            #expect { try sink.handOff().writeWhole(to: path, tryNameless: false) } throws: { error in
                guard let error = error as? HaulValues.DownloadError else { return false }
                return error.code == .fileSystem && error.errno == ENOSPC && error.path == path
                    && error.description.hasSuffix(
                        "The disk holding '\(directory.path)' is full (no space, or no inode for another file): free space there (or choose another folder), then resume."
                    )
            }
            #expect(pool.inUseCount == 0)
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test("a chunk larger than the buffer tops the buffer up, and its rest goes to the file uncopied")
    func largeChunksSkipTheBuffer() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("l.part").path
        let sink = try FileSink(path: path, pool: BufferPool(bufferSize: 64 * 1024, idleLimit: 4))
        let first = bytes(10 * 1024, seed: 11)  // buffered (a chunk of 4 KiB or more means fast)
        #expect(try append(first, to: sink, at: 1) == false)
        #expect(sink.bufferedCount == first.count)
        // 300 KiB at once: one write of the topped-up buffer, one of the remaining 246 KiB, nothing
        // left buffered.
        let large = bytes(300 * 1024, seed: 12)
        #expect(try append(large, to: sink, at: 2) == true)
        #expect(sink.bufferedCount == 0)
        #expect(sink.committedLength == Int64(first.count + large.count))
        let small = bytes(5 * 1024, seed: 13)
        #expect(try append(small, to: sink, at: 3) == false)
        try sink.close()
        #expect(contents(path) == first + large + small)
    }

    @Test("curl's receive buffer: large for a manager of a few transfers, 16 KiB for one of many")
    func receiveBufferShare() {
        #expect(MemoryBudget.receiveBufferSize(slots: 0) == 512 * 1024)
        #expect(MemoryBudget.receiveBufferSize(slots: 1) == 512 * 1024)
        #expect(MemoryBudget.receiveBufferSize(slots: 2) == 512 * 1024)
        #expect(MemoryBudget.receiveBufferSize(slots: 3) == 336 * 1024)
        #expect(MemoryBudget.receiveBufferSize(slots: 8) == 128 * 1024)
        #expect(MemoryBudget.receiveBufferSize(slots: 64) == 16 * 1024)
        #expect(MemoryBudget.receiveBufferSize(slots: 10_000) == 16 * 1024)
        let sizes = (1...200).map { MemoryBudget.receiveBufferSize(slots: $0) }
        #expect(sizes.allSatisfy { $0 % (16 * 1024) == 0 })
        #expect(zip(sizes, sizes.dropFirst()).allSatisfy { $0 >= $1 })
    }

    @Test("a whole remainder appears at its path only complete, replacing a partial file nobody knew of")
    func wholeRemainderAppearsComplete() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("w.part").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0xEE, count: 100_000)))
        let pool = BufferPool(bufferSize: 64 * 1024, idleLimit: 4)
        let sink = try FileSink(path: "\(path).unused", pool: pool)
        let chunk = bytes(40 * 1024, seed: 9)
        #expect(try append(chunk, to: sink, at: 1) == false)
        let remainder = sink.handOff()
        let descriptor = try remainder.writeWhole(to: path)
        close(descriptor)
        #expect(contents(path) == chunk)  // the stale 100,000 bytes are gone, not overwritten in part
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["w.part"])
        #expect(pool.idleCount == 1)
        // Without nameless files: a file beside the path, renamed onto it.
        let named = try FileSink(path: "\(path).named", pool: pool)
        let second = bytes(30 * 1024, seed: 10)
        #expect(try append(second, to: named, at: 1) == false)
        close(try named.handOff().writeWhole(to: path, tryNameless: false))
        #expect(contents(path) == second)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["w.part"])
        #expect(pool.idleCount == 1)
        // A folder that is not there: a typed error naming the path, and the buffer still goes back.
        let other = try FileSink(path: "\(path).other", pool: pool)
        #expect(try append(chunk, to: other, at: 1) == false)
        #expect(throws: HaulValues.DownloadError.self) {
            try other.handOff().writeWhole(to: directory.appendingPathComponent("missing/x.part").path)
        }
        #expect(pool.idleCount == 1)
    }

    @Test("past their share of descriptors, sinks close their file after each write and reopen it for the next")
    func openFilesLimit() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let pool = BufferPool(bufferSize: 64 * 1024, idleLimit: 4)
        let openFiles = OpenPartialFiles(limit: 2)
        let paths = (0..<5).map { directory.appendingPathComponent("\($0).part").path }
        let sinks = try paths.map { try FileSink(path: $0, pool: pool, openFiles: openFiles) }
        var expected = [[UInt8]](repeating: [], count: sinks.count)
        // Slow chunks (written through), interleaved: every sink writes ten times.
        for round in 0..<10 {
            for (index, sink) in sinks.enumerated() {
                let chunk = bytes(100 + index, seed: round * 7 + index)
                #expect(try append(chunk, to: sink, at: UInt64(round) * 1_000_000_000) == true)
                expected[index] += chunk
                #expect(openFiles.count <= 2)
                #expect(Descriptors.files(in: directory.path).count == openFiles.count)
            }
        }
        // The first two kept theirs; the others opened and closed theirs for each write.
        #expect(sinks.map(\.holdsDescriptor) == [true, true, false, false, false])
        for (index, sink) in sinks.enumerated() {
            #expect(sink.committedLength == Int64(expected[index].count))
            #expect(contents(paths[index]) == expected[index])
        }
        // A sink that gives its file to the disk thread, or closes it, no longer counts.
        let remainder = sinks[0].handOff()
        #expect(openFiles.count == 1)
        remainder.discard()
        try sinks[1].close()
        #expect(openFiles.count == 0)
        #expect(Descriptors.files(in: directory.path).isEmpty)
        // Without a limit (the default), every sink keeps its file.
        let unlimited = try paths.map { try FileSink(path: $0, pool: pool) }
        for sink in unlimited { #expect(try append(bytes(10, seed: 1), to: sink, at: 20_000_000_000) == true) }
        #expect(Descriptors.files(in: directory.path).count == paths.count)
    }

    @Test("idle stacks hand out the newest and trim only what stayed idle a whole period")
    func idleStack() {
        var stack = IdleStack<Int>(limit: 3)
        let kept = [1, 2, 3, 4].map { stack.push($0) }
        #expect(kept == [true, true, true, false])  // full: the caller frees the fourth
        var trimmed = stack.trim()
        #expect(trimmed.isEmpty)  // nothing was idle a whole period yet
        var taken = stack.pop()
        #expect(taken == 3)
        trimmed = stack.trim()
        #expect(trimmed == [1, 2])  // never taken since the last trim
        #expect(stack.items.isEmpty)
        _ = stack.push(5)
        _ = stack.push(6)
        trimmed = stack.trim()
        #expect(trimmed.isEmpty)  // new since the last trim
        taken = stack.pop()
        #expect(taken == 6)
        _ = stack.push(7)
        trimmed = stack.trim()
        #expect(trimmed == [5])  // 5 stayed; 7 came back after 6 was taken
        let rest = stack.removeAll()
        #expect(rest == [7])
        taken = stack.pop()
        #expect(taken == nil)
    }

    @Test("moving into place across file systems copies beside the destination, one temporary file per partial")
    func moveAcrossFileSystems() throws {
        let memory = try makeTemporaryDirectory(inMemory: true)
        let disk = try makeTemporaryDirectory()
        defer {
            try? FileManager.default.removeItem(at: memory)
            try? FileManager.default.removeItem(at: disk)
        }
        var memoryStatus = stat()
        var diskStatus = stat()
        #expect(stat(memory.path, &memoryStatus) == 0 && stat(disk.path, &diskStatus) == 0)
        try #require(
            memoryStatus.st_dev != diskStatus.st_dev,
            "/dev/shm and the temporary directory share a file system"
        )
        let destination = disk.appendingPathComponent("x.bin").path
        let first = bytes(70_000, seed: 1)
        let second = bytes(50_000, seed: 2)
        for (name, content) in [("a.part", first), ("b.part", second)] {
            #expect(
                FileManager.default.createFile(
                    atPath: memory.appendingPathComponent(name).path,
                    contents: Data(content)
                )
            )
        }
        try FinishJob.moveIntoPlace(from: memory.appendingPathComponent("a.part").path, to: destination)
        #expect(contents(destination) == first)
        try FinishJob.moveIntoPlace(from: memory.appendingPathComponent("b.part").path, to: destination)
        #expect(contents(destination) == second)
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk.path) == ["x.bin"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: memory.path).isEmpty)
    }
}

/// How often the refusing direct link of `namelessFilesAreLinked` was called (a C function pointer
/// captures nothing).
private let refusals = Atomic<Int>(0)
