import HaulValues

/// Why a download threw its partial bytes away and started again from zero.
public enum RestartReason: Sendable, Hashable, CustomStringConvertible {
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
    public var description: String { engine.description }

    /// The reason as the layers below give it.
    init(_ reason: HaulValues.RestartReason) {
        switch reason {
        case .rangeIgnored: self = .rangeIgnored
        case .remoteChanged: self = .remoteChanged
        case .rangeMismatch: self = .rangeMismatch
        case .rangeNotSatisfiable: self = .rangeNotSatisfiable
        case .noValidator: self = .noValidator
        case .overlapMismatch: self = .overlapMismatch
        case .decodedBody: self = .decodedBody
        }
    }

    /// The reason as the layers below know it.
    var engine: HaulValues.RestartReason {
        switch self {
        case .rangeIgnored: .rangeIgnored
        case .remoteChanged: .remoteChanged
        case .rangeMismatch: .rangeMismatch
        case .rangeNotSatisfiable: .rangeNotSatisfiable
        case .noValidator: .noValidator
        case .overlapMismatch: .overlapMismatch
        case .decodedBody: .decodedBody
        }
    }
}
