import CHaul
import FoundationEssentials
import Synchronization

/// What the layers below know of a request's rules: which URLs can be downloaded, and where a body
/// with no file of its own (discarded, or collected in memory) is said to go.
package enum RequestRules {
    /// A body discarded or kept in memory: its destination, never written.
    package static let nowhere = (path: "/dev/null", url: URL(fileURLWithPath: "/dev/null", isDirectory: false))

    /// Checks that a URL is one Haul can download: http(s), with a host, a port from 1 to 65535, and
    /// one that curl's own parser takes (what it would refuse at the first request, as a transfer
    /// failure, is a bad URL now, before anything is queued). The URL last found good is kept: asked
    /// again (a load test's one URL, a retried download), it is not parsed again (curl's parser, the
    /// URL's parts: a seventh of `haul load`'s work on the caller's thread).
    package static func checkedURL(_ url: URL) throws(DownloadError) -> URL {
        if lastGood.withLock({ $0 == url }) { return url }
        try check(url)
        lastGood.withLock { $0 = url }
        return url
    }

    /// The URL ``checkedURL(_:)`` last found good.
    private static let lastGood = Mutex<URL?>(nil)

    private static func check(_ url: URL) throws(DownloadError) {
        guard let scheme = url.scheme?.lowercased() else {
            throw DownloadError(code: .invalidURL, url: url.redactedString, detail: "it has no scheme such as https://")
        }
        guard scheme == "http" || scheme == "https" else {
            throw DownloadError(code: .unsupportedScheme, url: url.redactedString, detail: "the scheme '\(scheme)'")
        }
        guard let host = url.host, !host.isEmpty else {
            throw DownloadError(code: .invalidURL, url: url.redactedString, detail: "it has no host")
        }
        if let port = url.port, !(1...65535).contains(port) {
            throw DownloadError(
                code: .invalidURL,
                url: url.redactedString,
                detail: "its port \(port) is not from 1 to 65535"
            )
        }
        if let handle = curl_url() {
            defer { curl_url_cleanup(handle) }
            let code = curl_url_set(handle, CURLUPART_URL, url.absoluteString, 0)
            guard code == CURLUE_OK else {
                let reason = curl_url_strerror(code).map { String(cString: $0) } ?? "code \(code.rawValue)"
                throw DownloadError(
                    code: .invalidURL,
                    url: url.redactedString,
                    detail: "curl cannot parse it (\(reason))"
                )
            }
        }
    }
}
