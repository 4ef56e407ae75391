import FoundationEssentials

/// One download to queue with ``DownloadManager/enqueue(_:)``.
public struct DownloadRequest: Sendable, Hashable {
    /// An absolute `http` or `https` URL.
    public var url: URL
    /// Where the whole file goes.
    public var destination: URL
    /// Higher priorities are admitted first; first in, first out within one priority.
    public var priority: Int
    /// The whole file's expected digest, checked before it is moved into place: a mismatch fails
    /// the download with `.checksumMismatch`, deletes the partial and leaves the destination alone.
    public var checksum: Checksum?
    /// The file's expected length: a server announcing another fails the download at once
    /// (`.checksumMismatch`), and the finished file is checked against it.
    public var expectedSize: Int64?
    /// The `User-Agent` of this download's requests, instead of the manager's
    /// (``DownloadManager/Configuration/userAgent``). Recorded in the journal: a download restored
    /// by a later process keeps it.
    public var userAgent: String?
    /// Headers for this download's requests (a token, a cookie), over the manager's
    /// (``DownloadManager/Configuration/headers``): one of the same name replaces the manager's.
    /// Only their names are recorded in the journal; see ``DownloadHeader`` for what happens on
    /// redirects and after a restart.
    public var headers: [DownloadHeader]

    /// A request for `url` to `destination`.
    public init(
        url: URL,
        destination: URL,
        priority: Int = 0,
        checksum: Checksum? = nil,
        expectedSize: Int64? = nil,
        userAgent: String? = nil,
        headers: [DownloadHeader] = []
    ) {
        self.url = url
        self.destination = destination
        self.priority = priority
        self.checksum = checksum
        self.expectedSize = expectedSize
        self.userAgent = userAgent
        self.headers = headers
    }
}
