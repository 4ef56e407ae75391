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

    /// A request for `url` to `destination`.
    public init(url: URL, destination: URL, priority: Int = 0, checksum: Checksum? = nil, expectedSize: Int64? = nil) {
        self.url = url
        self.destination = destination
        self.priority = priority
        self.checksum = checksum
        self.expectedSize = expectedSize
    }
}

/// What ``DownloadManager/enqueue(_:)`` did with its requests.
public struct EnqueueSummary: Sendable {
    /// A request that could not be queued.
    public struct Rejection: Sendable {
        /// Its position in the sequence given to `enqueue`.
        public var index: Int
        /// Why (an invalid URL, an unsupported scheme, a destination that is a directory).
        public var error: DownloadError
    }

    /// Requests queued now (new ones, and paused, interrupted or failed ones queued again).
    public var queued = 0
    /// Requests that were already queued or running.
    public var alreadyQueued = 0
    /// Requests whose destination already holds the complete file: nothing to do.
    public var alreadyComplete = 0
    /// Requests that were refused, in order.
    public var rejected: [Rejection] = []
}
