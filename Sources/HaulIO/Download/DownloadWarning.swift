import FoundationEssentials
import HaulValues

/// Something a download did that its caller may not expect, as the layers below report it: the
/// public `DownloadWarning`, case for case (it says what each means).
package enum DownloadWarning: Sendable, Hashable, CustomStringConvertible {
    case unrequestedContentEncoding(String)
    case urlDropped(URL, reason: RestartReason)
    case versionsDiffer
    case insecureRedirect(URL)
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
