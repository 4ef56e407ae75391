import FoundationEssentials

extension DownloadRequest {
    /// Checks that a URL is one Haul can download.
    static func checkedURL(_ url: URL) throws(DownloadError) -> URL {
        guard let scheme = url.scheme?.lowercased() else {
            throw DownloadError(code: .invalidURL, url: url.redactedString, detail: "it has no scheme such as https://")
        }
        guard scheme == "http" || scheme == "https" else {
            throw DownloadError(code: .unsupportedScheme, url: url.redactedString, detail: "the scheme '\(scheme)'")
        }
        guard let host = url.host, !host.isEmpty else {
            throw DownloadError(code: .invalidURL, url: url.redactedString, detail: "it has no host")
        }
        return url
    }
}
