import CHaul
import FoundationEssentials

/// Identifies a download: derived from its destination, so that asking for the same destination
/// again, in this process or the next, finds the same download and the same partial file, whatever
/// URL it comes from now (a signed link refreshed with a new query, another mirror: the bytes on
/// disk continue when the new URL's answer proves it is the same file).
///
/// The first 128 bits of the SHA-256 of the standardised destination path, in hexadecimal: two
/// destinations never share an id in practice (an FNV-1a hash before schema 6 could collide, and a
/// collision made one download replace another's partial file).
public struct DownloadID: Hashable, Sendable, CustomStringConvertible {
    /// 32 hexadecimal digits.
    public let rawValue: String

    /// Wraps an id printed earlier.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// The id of the download to `destination` (as ``DownloadManager`` derives it).
    public init(destination: URL) {
        self.init(destinationPath: FilePath.standardized(destination))
    }

    /// The id of the download to `destination`; the URL no longer takes part.
    @available(*, deprecated, message: "a download's id is its destination's: use init(destination:)")
    public init(url: URL, destination: URL) {
        self.init(destination: destination)
    }

    /// The id of the download of `url` into `folder` under the name the server gives
    /// (``DownloadRequest/takesFileNameFromServer``): its folder and its URL (without user name,
    /// password and fragment), as the file it names is not known before it answers.
    public init(url: URL, folder: URL) {
        self.init(hashing: "haul/folder/1\n\(FilePath.standardized(folder))\n\(url.identityString)")
    }

    /// The id of a download into `folder` under the name the server gives, identified by the
    /// caller's `key` rather than its URL (``DownloadRequest/key``).
    public init(key: String, folder: URL) {
        self.init(hashing: "haul/folder-key/1\n\(FilePath.standardized(folder))\n\(key)")
    }

    /// The id of the download to `destinationPath`, a standardised path.
    init(destinationPath: String) {
        self.init(hashing: "haul/1\n\(destinationPath)")
    }

    private init(hashing text: String) {
        var digest = [UInt8](repeating: 0, count: 32)
        var bytes = Array(text.utf8)
        var length: UInt32 = 0
        let status = EVP_Digest(&bytes, bytes.count, &digest, &length, EVP_sha256(), nil)
        precondition(status == 1 && length == 32, "SHA-256 is not available from libcrypto")
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(32)
        for byte in digest.prefix(16) {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0f)])
        }
        self.rawValue = String(decoding: text, as: UTF8.self)
    }

    /// The raw value.
    public var description: String { rawValue }
}
