import FoundationEssentials
import HaulValues

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
        self.init(HaulValues.DownloadID(destination: destination))
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
        self.init(HaulValues.DownloadID(url: url, folder: folder))
    }

    /// The id of a download into `folder` under the name the server gives, identified by the
    /// caller's `key` rather than its URL (``DownloadRequest/key``).
    public init(key: String, folder: URL) {
        self.init(HaulValues.DownloadID(key: key, folder: folder))
    }

    /// The id, as `rawValue`.
    public var description: String { rawValue }
}

extension DownloadID {
    /// The id as the layers below know it.
    package init(_ id: HaulValues.DownloadID) { rawValue = id.rawValue }

    /// The id as the layers below know it.
    package var engine: HaulValues.DownloadID { HaulValues.DownloadID(rawValue: rawValue) }
}
