import CHaul
import FoundationEssentials
import Synchronization

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

    /// An id no other in this process has, with its first 64 bits as a number: a download no path or
    /// key finds again (a stream's, a body in memory's, a discarded one's). A count of the ids made,
    /// mixed with 128 random bits drawn once per process: the mix (SplitMix64's finaliser) is a
    /// bijection, so two ids of one process never meet, and another process's differ by its own
    /// random bits. It was one `getrandom` call per id: a load test's or a crawler's bodies each paid
    /// for a system call.
    package static func random() -> (id: DownloadID, token: UInt64) {
        let count = madeCount.add(1, ordering: .relaxed).newValue
        let halves = (mixed(count &+ processKey.0), mixed(count ^ processKey.1))
        return (DownloadID(rawValue: withUnsafeBytes(of: halves) { hex($0) }), halves.0)
    }

    /// How many ids ``random()`` made.
    private static let madeCount = Atomic<UInt64>(0)

    /// The process's random bits for ``random()``, drawn once.
    private static let processKey: (UInt64, UInt64) = {
        var halves: (UInt64, UInt64) = (0, 0)
        let filled = withUnsafeMutableBytes(of: &halves) { CHaul_random_bytes($0.baseAddress, $0.count) == 0 }
        if !filled {
            var generator = SystemRandomNumberGenerator()
            halves = (generator.next(), generator.next())
        }
        return halves
    }()

    /// SplitMix64's finaliser: a bijection of 64-bit values that spreads each input bit over all.
    private static func mixed(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// The raw value.
    package var description: String { rawValue }
}
