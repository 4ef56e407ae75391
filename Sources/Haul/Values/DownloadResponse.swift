import FoundationEssentials
import HaulValues

/// What the server said of the file in the last response whose body a download accepted.
public struct DownloadResponse: Sendable, Hashable {
    /// The response as the loop recorded it (its headers packed until read).
    package var record: ResponseRecord

    /// The response the loop recorded.
    package init(_ record: ResponseRecord) { self.record = record }

    /// A response with these fields (tests, and values made by hand).
    package init(
        url: URL,
        status: Int,
        contentType: String? = nil,
        entityTag: String? = nil,
        lastModified: String? = nil,
        totalBytes: Int64? = nil,
        headers: [DownloadHeader] = []
    ) {
        self.init(
            ResponseRecord(
                url: url,
                status: status,
                contentType: contentType,
                entityTag: entityTag,
                lastModified: lastModified,
                totalBytes: totalBytes,
                headers: headers.engine
            )
        )
    }

    /// The URL that answered, after redirects (without a user name or password).
    public var url: URL {
        get { record.url }
        set { record.url = newValue }
    }
    /// The HTTP status: 200, or 206 for a resumed download.
    public var status: Int {
        get { record.status }
        set { record.status = newValue }
    }
    /// The `Content-Type`, if sent.
    public var contentType: String? {
        get { record.contentType }
        set { record.contentType = newValue }
    }
    /// The `ETag`, if sent.
    public var entityTag: String? {
        get { record.entityTag }
        set { record.entityTag = newValue }
    }
    /// The `Last-Modified`, if sent.
    public var lastModified: String? {
        get { record.lastModified }
        set { record.lastModified = newValue }
    }
    /// The file's whole length, when known (for a 206, from its `Content-Range`).
    public var totalBytes: Int64? {
        get { record.totalBytes }
        set { record.totalBytes = newValue }
    }
    /// Every header of the response, in the order sent, for a body in memory
    /// (``DownloadManager/data(from:headers:maximumSize:)``) and a stream
    /// (``DownloadManager/stream(from:headers:bufferLimit:)``); empty for a file, whose download
    /// keeps only what resuming needs (the fields above), and for a discarded body. A `Set-Cookie`'s value, and any other
    /// sensitive one (``DownloadHeader/isSensitive``), is kept but never printed. Made from the
    /// response each time it is read: keep the array rather than read it again in a loop.
    public var headers: [DownloadHeader] {
        get { record.headers.map(DownloadHeader.init) }
        set { record.headers = newValue.engine }
    }

    /// The value of the first header named `name` (compared without case), or `nil`.
    public func value(forHeader name: String) -> String? { record.value(forHeader: name) }
}

extension DownloadResponse: CustomStringConvertible {
    /// "206 from https://example.com/big.iso, application/x-iso9660-image, 32.0 MiB, ETag "abc"".
    public var description: String { record.description }
}
