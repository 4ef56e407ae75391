/// Why a download threw its partial bytes away and started again from zero, as the layers below
/// give it: the public `RestartReason`, case for case (it says what each means).
package enum RestartReason: Sendable, Hashable, CustomStringConvertible {
    case rangeIgnored
    case remoteChanged
    case rangeMismatch
    case rangeNotSatisfiable
    case noValidator
    case overlapMismatch
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
