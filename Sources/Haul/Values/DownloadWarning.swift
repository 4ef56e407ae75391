import FoundationEssentials
import HaulIO
import HaulValues

/// Something a download did that its caller may not expect, though it goes on.
public enum DownloadWarning: Sendable, Hashable, CustomStringConvertible {
    /// The server labelled the body with this `Content-Encoding` (`gzip`, `br`…) although the request
    /// did not ask for one. The file is saved as sent, encoded; that is right for a `.gz` file a
    /// server labels so, and wrong for a file it compressed on its own.
    /// ``DownloadManager/Configuration/decodesCompression`` asks for and decodes such bodies.
    case unrequestedContentEncoding(String)
    /// A URL the download moved to (a mirror, a fresh URL) serves another file than the bytes on
    /// disk (for this reason): it is not used, and nothing it sent was written.
    case urlDropped(URL, reason: RestartReason)
    /// The connections of a download over several were answered with different versions of the file
    /// (different ETags) twice: two servers behind one name, each with its own version, as a load
    /// balancer spreads connections. The download goes on over one connection, on one version.
    case versionsDiffer
    /// An `https` download was redirected to this `http` URL (on its own host or another): Haul
    /// follows, as curl, wget and browsers do, but the rest travels unencrypted and unauthenticated
    /// (a checksum, ``DownloadRequest/checksum``, still proves the file). The download's headers and
    /// URL credentials are not sent to it: a change of scheme is another origin.
    case insecureRedirect(URL)
    /// The server sent the file from its start again (for this reason: it ignored `Range`, or a
    /// decoded body was asked for from its start), and the answer is the version held (its strong
    /// validator, or the bytes before the resume point compared): its first bytes, as many as the
    /// download has (on disk, or given to a stream's reader), are read past as they come again,
    /// not written, and nothing is lost. Progress stands still meanwhile.
    case repeatedBytesReadPast(Int64, reason: RestartReason)

    /// A sentence for logs and the CLI.
    public var description: String { engine.description }

    /// The warning as the layers below give it.
    init(_ warning: HaulIO.DownloadWarning) {
        switch warning {
        case .unrequestedContentEncoding(let encoding): self = .unrequestedContentEncoding(encoding)
        case .urlDropped(let url, let reason): self = .urlDropped(url, reason: RestartReason(reason))
        case .versionsDiffer: self = .versionsDiffer
        case .insecureRedirect(let url): self = .insecureRedirect(url)
        case .repeatedBytesReadPast(let bytes, let reason):
            self = .repeatedBytesReadPast(bytes, reason: RestartReason(reason))
        }
    }

    /// The warning as the layers below know it.
    var engine: HaulIO.DownloadWarning {
        switch self {
        case .unrequestedContentEncoding(let encoding): .unrequestedContentEncoding(encoding)
        case .urlDropped(let url, let reason): .urlDropped(url, reason: reason.engine)
        case .versionsDiffer: .versionsDiffer
        case .insecureRedirect(let url): .insecureRedirect(url)
        case .repeatedBytesReadPast(let bytes, let reason): .repeatedBytesReadPast(bytes, reason: reason.engine)
        }
    }
}
