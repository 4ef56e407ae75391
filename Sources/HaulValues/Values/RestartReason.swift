/// Why a download threw its partial bytes away and started again from zero.
package enum RestartReason: Sendable, Hashable, CustomStringConvertible {
    /// The server ignored the range request and sent the whole file (HTTP 200), and nothing showed
    /// that file to be the partial's (a `200` that carries the strong validator the partial is
    /// pinned to is read past the bytes on disk instead, with no restart).
    case rangeIgnored
    /// The remote file changed since the partial was written (its validator or length differs).
    case remoteChanged
    /// The server answered with a range that does not start where the partial file ends.
    case rangeMismatch
    /// The server said the range cannot be satisfied although the partial file is not complete.
    case rangeNotSatisfiable
    /// The server gave no strong validator (a strong ETag, or a Last-Modified at least a minute
    /// older than the response) with the partial's bytes, so nothing proves they are the remote
    /// file's current ones. ``DownloadManager/Configuration/resumesWithoutValidator`` continues such
    /// partials after checking their last bytes instead.
    case noValidator
    /// An unvalidated resume asked for the bytes before its resume point again, and they differ
    /// from the partial file's: the remote file changed.
    case overlapMismatch
    /// Bodies are decoded (``DownloadManager/Configuration/decodesCompression``): the decoded bytes
    /// on disk are not the server's encoded ones, which ranges count, so the body is asked for from
    /// its start again, and this answer carries no strong validator the partial is pinned to (one
    /// that does is read past the bytes on disk instead).
    case decodedBody

    /// A short sentence for logs and the CLI.
    package var description: String {
        switch self {
        case .rangeIgnored: "the server ignored the range request and sent the whole file"
        case .remoteChanged: "the remote file changed"
        case .rangeMismatch: "the server answered a different range than the one asked for"
        case .rangeNotSatisfiable: "the server could not serve the rest of the partial file"
        case .noValidator: "the server sends no strong ETag or Last-Modified to prove the partial file is current"
        case .overlapMismatch: "the remote file changed (the bytes before the resume point differ)"
        case .decodedBody: "a decoded (decompressed) body cannot be resumed in the middle"
        }
    }
}
