import FoundationEssentials

/// What the server said of the file in the last response whose body a download accepted.
public struct DownloadResponse: Sendable, Hashable {
    /// The URL that answered, after redirects (without a user name or password).
    public var url: URL
    /// The HTTP status: 200, or 206 for a resumed download.
    public var status: Int
    /// The `Content-Type`, if sent.
    public var contentType: String?
    /// The `ETag`, if sent.
    public var entityTag: String?
    /// The `Last-Modified`, if sent.
    public var lastModified: String?
    /// The file's whole length, when known (for a 206, from its `Content-Range`).
    public var totalBytes: Int64?
}
