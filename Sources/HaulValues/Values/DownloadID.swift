import CHaul
import FoundationEssentials

/// Identifies a download, as the layers below know it (the facade's public `DownloadID` says how it
/// is derived): the first 128 bits of the SHA-256 of the standardised destination path, in
/// hexadecimal.
package struct DownloadID: Hashable, Sendable, CustomStringConvertible {
    /// 32 hexadecimal digits.
    package let rawValue: String
    /// What it is hashed by: its first 16 digits as a number. An id's bits are a hash's or random,
    /// so these 64 tell ids apart as well as the whole; hashing them is hashing 8 bytes, not a
    /// string of 32 (ids key most of the loop's tables). A raw value of another form, read from
    /// elsewhere, is keyed by a hash of its text.
    private let key: UInt64

    /// Wraps an id printed earlier.
    package init(rawValue: String) {
        self.rawValue = rawValue
        self.key = Self.key(of: rawValue)
    }

    package static func == (left: DownloadID, right: DownloadID) -> Bool {
        left.key == right.key && left.rawValue == right.rawValue
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(key)
    }

    /// ``key``: the first 16 hexadecimal digits of `rawValue`, or else the FNV-1a hash of its bytes:
    /// a function of the text alone, however the string is stored (`withUTF8` makes it contiguous).
    private static func key(of rawValue: String) -> UInt64 {
        var text = rawValue
        return text.withUTF8 { bytes in
            guard bytes.count >= 16 else { return fnv1a(bytes) }
            var value: UInt64 = 0
            for byte in bytes.prefix(16) {
                guard let digit = Hexadecimal.value(ofDigit: byte) else { return fnv1a(bytes) }
                value = value << 4 | UInt64(digit)
            }
            return value
        }
    }

    /// The FNV-1a hash of `bytes`.
    private static func fnv1a(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }

    /// The id of the download to `destination` (as ``DownloadManager`` derives it).
    package init(destination: URL) {
        self.init(destinationPath: FilePath.standardized(destination))
    }

    /// The id of the download to `destination`; the URL no longer takes part.

    /// The id of the download of `url` into `folder` under the name the server gives
    /// (``DownloadRequest/takesFileNameFromServer``): its folder and its URL (without user name,
    /// password and fragment), as the file it names is not known before it answers.
    package init(url: URL, folder: URL) {
        self.init(url: url, folderPath: FilePath.standardized(folder))
    }

    /// ``init(url:folder:)`` of the standardised path of the folder.
    package init(url: URL, folderPath: String) {
        self.init(hashing: "haul/folder/1\n\(folderPath)\n\(url.identityString)")
    }

    /// The id of a download into `folder` under the name the server gives, identified by the
    /// caller's `key` rather than its URL (``DownloadRequest/key``).
    package init(key: String, folder: URL) {
        self.init(key: key, folderPath: FilePath.standardized(folder))
    }

    /// ``init(key:folder:)`` of the standardised path of the folder.
    package init(key: String, folderPath: String) {
        self.init(hashing: "haul/folder-key/1\n\(folderPath)\n\(key)")
    }

    /// The id of the download to `destinationPath`, a standardised path.
    package init(destinationPath: String) {
        self.init(hashing: "haul/1\n\(destinationPath)")
    }

    private init(hashing text: String) {
        var text = text
        self.init(
            rawValue: text.withUTF8 { bytes in
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { digest in
                    let status = CHaul_sha256(bytes.baseAddress, bytes.count, digest.baseAddress)
                    precondition(status == 1, "SHA-256 is not available from libcrypto")
                    return Self.hex(UnsafeRawBufferPointer(digest))  // its first 16 bytes
                }
            }
        )
    }

    /// The 16 bytes at `bytes` in hexadecimal: an id's raw value.
    private static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        Hexadecimal.lowercase(bytes.prefix(16))
    }

    /// An id of 128 random bits, with its first 64 as a number: a download no path or key finds again
    /// (a stream's, a body in memory's, a discarded one's). Hashing a random token gave nothing more
    /// than its randomness. One `getrandom` call.
    package static func random() -> (id: DownloadID, token: UInt64) {
        var halves: (UInt64, UInt64) = (0, 0)
        let filled = withUnsafeMutableBytes(of: &halves) { CHaul_random_bytes($0.baseAddress, $0.count) == 0 }
        if !filled {
            var generator = SystemRandomNumberGenerator()
            halves = (generator.next(), generator.next())
        }
        return (DownloadID(rawValue: withUnsafeBytes(of: halves) { hex($0) }), halves.0)
    }

    /// The raw value.
    package var description: String { rawValue }
}
