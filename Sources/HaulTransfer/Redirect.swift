import FoundationEssentials
import HaulValues

/// Where a redirect leads, decided from its `Location` alone. Pure: unit-tested without I/O.
///
/// Haul follows redirects itself (curl's `CURLOPT_FOLLOWLOCATION` is off) so that a request's
/// headers go only to its own origin: curl 7.88 keeps every custom header but `Authorization` and
/// `Cookie` on a redirect to another host (CVE-2018-1000007 covers those two), and would send an
/// API key or a signed token to wherever a server points.
enum Redirect: Equatable {
    /// Send the next request to this URL; `sameOrigin`: with the download's headers and the URL's
    /// user name and password (the origin is the download's URL's: scheme, host and port).
    case follow(URL, sameOrigin: Bool)
    /// The redirect cannot be followed: the download fails with this error (not retried).
    case refuse(DownloadError)

    /// The statuses that redirect a GET (300, 304 and 305 do not).
    static func isRedirect(status: Int) -> Bool { [301, 302, 303, 307, 308].contains(status) }

    /// Decides on a redirect to `location` (absolute, as curl resolved it), after `followed` others.
    ///
    /// - Parameters:
    ///   - location: the absolute URL the server redirects to (`nil`: curl could not make one of its
    ///     `Location`).
    ///   - original: the download's URL, whose origin the headers belong to.
    ///   - followed: redirects followed since the request to `original`.
    ///   - limit: how many may be followed.
    static func decide(location: String?, original: URL, followed: Int, limit: Int) -> Redirect {
        let errorURL = original.redactedString
        guard followed < limit else {
            return .refuse(
                DownloadError(
                    code: .transport,
                    url: errorURL,
                    curlCode: 47,
                    detail: "the server redirected more than \(limit) times"
                )
            )
        }
        guard let location, let target = URL(string: location), let host = target.host, !host.isEmpty else {
            return .refuse(
                DownloadError(
                    code: .transport,
                    url: errorURL,
                    curlCode: 1,
                    detail: "the server redirected to an address that is not a valid URL"
                )
            )
        }
        let scheme = target.scheme?.lowercased() ?? ""
        guard scheme == "http" || scheme == "https" else {
            return .refuse(
                DownloadError(
                    code: .transport,
                    url: errorURL,
                    curlCode: 1,
                    detail: "the server redirected to a \(scheme):// address"
                )
            )
        }
        guard target.origin == original.origin else { return .follow(target, sameOrigin: false) }
        // Same origin: the URL's credentials go too, as curl sends them to the same host.
        guard original.hasCredentials, !target.hasCredentials,
            var components = URLComponents(url: target, resolvingAgainstBaseURL: false)
        else {
            return .follow(target, sameOrigin: true)
        }
        components.percentEncodedUser = original.user(percentEncoded: true)
        components.percentEncodedPassword = original.password(percentEncoded: true)
        return .follow(components.url ?? target, sameOrigin: true)
    }
}

extension URL {
    /// Scheme, host and port (the scheme's default when none is given), in lowercase: what a
    /// redirect must keep for a request's headers to follow it.
    var origin: String {
        let scheme = self.scheme?.lowercased() ?? ""
        let port = self.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\((host ?? "").lowercased()):\(port)"
    }
}
