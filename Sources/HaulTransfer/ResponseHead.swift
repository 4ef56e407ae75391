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

    /// Whether it is a file server's whole answer for another version than `pinned`, named only
    /// weakly: a weak ETag whose tag is not the pinned one, a length, and ranges offered. Apache
    /// calls the ETag of a file modified in the last second, or dated in the future (a clock that
    /// differs, an archive's times), weak; an error page names no version and offers no ranges.
    /// Enough to replace the bytes on disk with the whole new body (never to continue them).
    func namesAnotherVersionWeakly(than pinned: PinnedVersion) -> Bool {
        guard pinned.kind == .entityTag, let entityTag, entityTag.hasPrefix("W/"), acceptsRanges,
            contentLength != nil
        else { return false }
        return entityTag.dropFirst(2) != pinned.value
    }
}
