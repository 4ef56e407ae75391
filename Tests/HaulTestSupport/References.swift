import Foundation
import Testing

@testable import Haul
@testable import HaulValues

/// A seeded xorshift generator: a randomized test prints its seed, and the same seed gives the same
/// inputs again.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed | 1 }
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}

/// The digest coreutils computes (`sha256sum`, `sha1sum`, `md5sum`): a reference independent of Haul.
func coreutilsDigest(_ algorithm: Checksum.Algorithm, of data: Data, in directory: URL) async throws -> String {
    let input = directory.appendingPathComponent("digest-input")
    let output = directory.appendingPathComponent("digest-output")
    try data.write(to: input)
    let tool = try ChildProcess("/usr/bin/\(algorithm.rawValue)sum", [input.path], stdout: output.path)
    #expect(await tool.exited() == 0)
    return String(try String(contentsOf: output, encoding: .utf8).prefix(algorithm.hexLength))
}
