import FoundationEssentials

/// Identifies a download: derived from its URL (without a user name or password, which never reach
/// the disk) and destination, so the same pair always maps to the same partial file and the same id,
/// in this process and the next.
public struct DownloadID: Hashable, Sendable, CustomStringConvertible {
    /// 32 hexadecimal digits.
    public let rawValue: String

    /// Wraps an id printed earlier.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// The id of the download of `url` to `destination` (as ``DownloadManager`` derives it).
    public init(url: URL, destination: URL) {
        self.init(url: url.redactedString, destinationPath: FilePath.standardized(destination))
    }

    /// The id of the download of `url` to `destination`.
    init(url: String, destinationPath: String) {
        let key = Array("\(url)\n\(destinationPath)".utf8)
        // Two independent 64-bit FNV-1a hashes: a stable, dependency-free 128-bit key (not a security hash).
        func fnv1a(_ bytes: [UInt8], basis: UInt64) -> UInt64 {
            var hash = basis
            for byte in bytes {
                hash ^= UInt64(byte)
                hash &*= 0x100_0000_01b3
            }
            return hash
        }
        let high = fnv1a(key, basis: 0xcbf2_9ce4_8422_2325)
        let low = fnv1a(key.reversed(), basis: 0x8422_2325_cbf2_9ce4)
        func hex(_ value: UInt64) -> String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }
        self.rawValue = hex(high) + hex(low)
    }

    /// The raw value.
    public var description: String { rawValue }
}
