import FoundationEssentials
import HaulValues

/// Something a download did that its caller may not expect, though it goes on.
package enum DownloadWarning: Sendable, Hashable, CustomStringConvertible {
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
    package var description: String {
        switch self {
        case .unrequestedContentEncoding(let encoding):
            "the server sent the body with Content-Encoding: \(encoding) without being asked; it is saved as sent"
        case .urlDropped(let url, let reason):
            "\(url.absoluteString) is not used: it serves another file than the bytes on disk (\(reason))"
        case .versionsDiffer:
            "the server's connections answered with different versions of the file (several servers behind one "
                + "name?); it is fetched over one connection"
        case .insecureRedirect(let url):
            "the server redirected this https download to \(url.absoluteString): the file comes over plain HTTP, "
                + "unencrypted (no header or password was sent there)"
        case .repeatedBytesReadPast(let bytes, let reason):
            "\(reason); its first \(bytes) bytes, already received, are read past as they come again (nothing is "
                + "lost; progress stands still meanwhile)"
        }
    }
}
