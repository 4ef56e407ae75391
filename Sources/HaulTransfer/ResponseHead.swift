/// What Haul reads of a response before it accepts a single body byte.
struct ResponseHead: Equatable, Sendable {
    var status: Int
    var contentRange: String?
    /// This response's Content-Length (the rest of the file for a 206), when announced.
    var contentLength: Int64?
    var entityTag: String?
    var lastModified: String?
    /// The response's `Date`, which says whether its Last-Modified is strong.
    var date: String? = nil
    /// The body's `Content-Encoding`, unless `identity`.
    var contentEncoding: String? = nil
    /// Every Content-Length value, when the response announced differing ones: its body cannot be
    /// framed (RFC 9112, 6.3), whichever length curl used.
    var conflictingContentLengths: [String]? = nil
    /// The `Content-Type`, and whether `Accept-Ranges: bytes` was sent: read only for an answer to a
    /// resume or a restart, where they tell an error page or an ignored `If-Range` (``ResponseDecision``).
    var contentType: String? = nil
    var acceptsRanges = false

    /// Whether it names its version with a validator of this kind (a strong ETag; a Last-Modified).
    func names(_ kind: PinnedVersion.Kind) -> Bool {
        switch kind {
        case .entityTag: entityTag.map { !$0.hasPrefix("W/") } ?? false
        case .lastModified: lastModified != nil
        }
    }
}
