import Foundation
import Glibc
import Testing

@testable import Haul

/// The partial file's writer, driven with explicit times: no clock, no sleeps.
@Suite("FileSink")
struct FileSinkTests {
    /// Deterministic bytes: `count` of them starting at `seed`.
    private func bytes(_ count: Int, seed: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31) &+ seed) }
    }

    private func append(_ chunk: [UInt8], to sink: FileSink, at now: UInt64) throws -> Bool {
        try chunk.withUnsafeBytes { try sink.append($0, now: now) }
    }

    private func contents(_ path: String) -> [UInt8]? {
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

    @Test("a buffer left unfilled is written out and given back; the sink writes through until a buffer's worth comes quickly")
    func slowDownloadWritesThrough() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("b.part").path
        let size = 16 * 1024
        let pool = BufferPool(bufferSize: size, idleLimit: 4)
        let sink = try FileSink(path: path, pool: pool)
        let age = FileSink.idleAge
        var expected: [UInt8] = []

        let first = bytes(1000, seed: 1)
        expected += first
        #expect(try append(first, to: sink, at: 0) == false)
        #expect(try sink.releaseIfIdle(now: age - 1) == false)  // not idle long enough
        #expect(sink.committedLength == 0)
        #expect(try sink.releaseIfIdle(now: age) == true)
        #expect(sink.writesThrough)
        #expect(sink.committedLength == 1000)
        #expect(contents(path) == expected)

        // Slow: every chunk is written at once.
        let second = bytes(500, seed: 2)
        expected += second
        #expect(try append(second, to: sink, at: age + 1) == true)
        #expect(sink.committedLength == 1500)

        // A buffer's worth within idleAge: fast again, the next chunk is buffered.
        let burst = bytes(size, seed: 3)
        expected += burst
        #expect(try append(burst, to: sink, at: age + 2) == true)
        #expect(!sink.writesThrough)
        let tail = bytes(100, seed: 4)
        expected += tail
        #expect(try append(tail, to: sink, at: age + 3) == false)
        #expect(sink.committedLength == Int64(1500 + size))
        #expect(sink.receivedLength == Int64(expected.count))

        try sink.close()
        #expect(contents(path) == expected)
    }

    @Test("a buffer released to a full disk reports the write error and its path")
    func releaseToFullDiskFails() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("c.part").path
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "/dev/full")
        let sink = try FileSink(path: path, pool: BufferPool(bufferSize: 16 * 1024, idleLimit: 1))
        #expect(try append(bytes(100, seed: 5), to: sink, at: 0) == false)
        #expect { try sink.releaseIfIdle(now: FileSink.idleAge) } throws: { error in
            guard let error = error as? DownloadError else { return false }
            return error.code == .fileSystem && error.errno == ENOSPC && error.path == path
        }
    }
}
