import HaulValues

/// A header sent with a download's requests: a token, a cookie, an API key.
///
/// Values stay in memory: the journal records a download's header *names* only, so a download
/// restored by a later process gets its values again from
/// ``DownloadManager/Configuration/headerProvider`` (see there). Headers go with every attempt,
/// every resume and every redirect to the same origin (scheme, host and port), and are dropped on
/// a redirect to another origin, whatever their name (curl drops only `Authorization` and `Cookie`).
/// They go to each of the download's own URLs, its mirrors and fresh URLs included: those are the
/// caller's choice (as curl's and aria2's `--header` go to every URL given), where a redirect is the
/// server's.
///
/// The values of sensitive headers (``isSensitive``) never appear in Haul's descriptions, logs,
/// errors or events: printing a request (or `dump`ing it) shows `Authorization: <redacted>`.
///
/// ```swift
/// let request = DownloadRequest(
///     url: URL(string: "https://api.example.com/exports/2026-11.tar")!,
///     destination: URL(fileURLWithPath: "/srv/exports/2026-11.tar"),
///     headers: [.authorization(bearer: token), DownloadHeader("X-Tenant", "acme")]
/// )
/// ```
public struct DownloadHeader: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The header's name, as given (HTTP compares names without case).
    public var name: String
    /// The header's value.
    public var value: String
    /// Whether the value is a secret: shown as `<redacted>`. `Authorization`, `Cookie`, `Set-Cookie`,
    /// `Proxy-Authorization` and names that contain `token`, `secret`, `key`, `password` or `auth`
    /// are sensitive whatever this says.
    public var isSensitive: Bool

    /// A header `name: value`; mark it `sensitive` when its value is a secret that its name does
    /// not give away (`Authorization`, `Cookie` and the like are sensitive anyway).
    public init(_ name: String, _ value: String, sensitive: Bool = false) {
        self.init(HaulValues.DownloadHeader(name, value, sensitive: sensitive))
    }

    /// `Authorization: Bearer <token>`.
    public static func authorization(bearer token: String) -> DownloadHeader {
        DownloadHeader("Authorization", "Bearer \(token)", sensitive: true)
    }

    /// `Cookie: <value>`.
    public static func cookie(_ value: String) -> DownloadHeader {
        DownloadHeader("Cookie", value, sensitive: true)
    }

    /// `Name: value`, or `Name: <redacted>` for a sensitive header.
    public var description: String { engine.description }
    /// `DownloadHeader(Name: value)`, redacted as ``description`` is.
    public var debugDescription: String { engine.debugDescription }

    /// Its name and, unless sensitive, its value: what `dump` and debuggers show.
    public var customMirror: Mirror {
        Mirror(self, children: ["name": name, "value": isSensitive ? "<redacted>" : value, "isSensitive": isSensitive])
    }

    /// What keeps this header from being sent, in words that never include its value, or `nil`
    /// when it can be: its name must be a token, its value must hold no line break or NUL, and it
    /// must not be one Haul sets itself (`Range`, `If-Range`, the other conditionals,
    /// `Accept-Encoding`, `Content-Length`, `Transfer-Encoding`, `TE`, `Connection`, `Upgrade`,
    /// `Expect`). A download or manager given such a header throws `.invalidHeader`.
    public func problem() -> String? { engine.problem() }
}

extension DownloadHeader {
    /// The header as the layers below send it.
    init(_ header: HaulValues.DownloadHeader) {
        (name, value, isSensitive) = (header.name, header.value, header.isSensitive)
    }

    /// The header as the layers below know it.
    var engine: HaulValues.DownloadHeader {
        HaulValues.DownloadHeader(name: name, value: value, isSensitive: isSensitive)
    }
}

extension [DownloadHeader] {
    /// The headers as the layers below know them.
    var engine: [HaulValues.DownloadHeader] { map(\.engine) }
}
