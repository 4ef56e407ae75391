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
}
