import CHaul
import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 42: a slow consumer over a 1 GiB body. Run alone (scripts/test.sh): a gigabyte through four
/// kernel copies beside the suite starved the timing of its SIGKILL tests.
@Suite("Streams, a gigabyte", .timeLimit(.minutes(3)))
struct GigabyteStreamTests {
    /// Writes a file of `size` bytes: a random block of 1,000,003 bytes again and again (a length
    /// prime to every chunk size, so a chunk lost, doubled or out of order changes the digest).
    static func writeFile(_ path: String, size: Int) throws {
        var block = [UInt8](repeating: 0, count: 1_000_003)
        var generator = SystemRandomNumberGenerator()
        for index in block.indices { block[index] = generator.next() }
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        var written = 0
        while written < size {
            let count = min(block.count, size - written)
            try handle.write(contentsOf: block[..<count])
            written += count
        }
    }

    @Test("a 1 GiB body to a reader slower than the network: never more than the bound ahead, every byte right")
    func gigabyteBehindASlowReader() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 1 << 30
        let file = server.root.appendingPathComponent("gigabyte.bin").path
        try Self.writeFile(file, size: size)
        let expected = try HaulValues.Checksum.digest(ofFileAt: file, algorithm: .sha256)
        var configuration = DownloadManager.Configuration.forTests(bufferSize: 16 * 1024)
        configuration.progressInterval = .milliseconds(1)
        try await withDownloadManager(configuration: configuration) { manager in
            let stream = try manager.stream(from: server.url("gigabyte.bin"), bufferLimit: 256 * 1024)
            let context = EVP_MD_CTX_new()
            defer { EVP_MD_CTX_free(context) }
            EVP_DigestInit_ex(context, EVP_sha256(), nil)
            var (read, chunks, mostAhead) = (Int64(0), 0, Int64(0))
            for try await chunk in stream {
                chunk.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
                read += Int64(chunk.count)
                chunks += 1
                mostAhead = max(mostAhead, stream.download.progress.bytesReceived - read)
                // Slower than loopback: a pause every 4 MiB or so.
                if chunks % 64 == 0 { try await Task.sleep(for: .milliseconds(2)) }
            }
            var digest = [UInt8](repeating: 0, count: 32)
            var length: UInt32 = 0
            EVP_DigestFinal_ex(context, &digest, &length)
            #expect(read == Int64(size))
            #expect(digest.map { String(format: "%02x", $0) }.joined() == expected)
            // The pipe (256 KiB), a chunk held back and what curl and the socket hold: the transfer
            // waited for the reader the whole way, whatever the body's length.
            #expect(mostAhead <= 1024 * 1024, "\(mostAhead)")
        }
    }
}
