import FoundationEssentials
import Glibc

/// What ``DownloadError/description`` tells the user to do, by curl's error code and HTTP status.
extension DownloadError {
    /// What the user can do about a failed transfer, by curl's error code.
    static func advice(
        forCurlCode code: Int?,
        kept bytesKept: Bool,
        proxy: Bool,
        connecting: Bool,
        setting: (Setting) -> String
    ) -> String {
        // Said only when there are bytes: a download that never received any has none to keep.
        let kept = bytesKept ? "; the bytes already received are kept" : ""
        switch code {
        case 5, 6:  // could not resolve the proxy, the host
            return "Check the host name and the DNS (or proxy) settings, then try again\(kept)."
        case 7 where proxy:
            return "Check that the proxy is up and reachable at that address and port "
                + "(\(setting(.proxy)), or http_proxy), then try again\(kept)."
        case 7:  // could not connect
            return
                "Check that the server is up and reachable at that address and port, then try again\(kept)."
        case 8:  // the answer was not valid HTTP
            return "The server's answer is not valid HTTP and was not used; try again later or tell the "
                + "server's operator\(kept)."
        case 28 where connecting:  // the connection was not made in time
            return "The server did not take the connection in time: check that it is up and reachable, then try "
                + "again\(kept), or raise \(setting(.connectTimeout)) for a slow network."
        case 28:  // no byte for the stall timeout
            return "The server or the network went silent: try again later\(kept), or raise "
                + "\(setting(.stallTimeout)) for a slow server."
        case 35, 58, 59, 83, 90, 91:  // TLS handshake, client certificate, ciphers, issuer, pinning, status
            return "The TLS handshake failed: check that the address serves HTTPS on that port and that its "
                + "TLS set-up is current\(kept)."
        case 27:  // out of memory: in practice, response headers past curl's 100 KB limit
            return "curl could not hold the server's answer: its headers are larger than the 100 KB curl accepts, "
                + "or the process is out of memory. Tell the server's operator, or try again later\(kept)."
        case 1:  // a redirect to a scheme other than http(s), such as file:// or ftp://
            return "The server redirected to an address Haul does not download (only http:// and https:// "
                + "are followed, never file:// or ftp://); check the URL with its publisher."
        case 47:  // too many redirects
            return "The server redirects in a loop, or more often than the limit allows "
                + "(\(setting(.maximumRedirects))); check the URL."
        case 60, 77:  // the certificate failed verification; the CA file could not be read
            return "If the server's certificate is signed by an authority of your own, give its PEM file "
                + "(\(setting(.certificateAuthorityFile))); verification is never turned off\(kept)."
        default:
            return "Check the address and the network, then try again\(kept)."
        }
    }

    /// Said after a body cut short (or stalled) at the last attempt of a download whose bodies are
    /// decoded: asking again from the start cannot get past a link that keeps dropping.
    func decodedBodyNote(setting: (Setting) -> String) -> String {
        let cutShort =
            code == .sizeMismatch || [18, 56, 92].contains(curlCode ?? 0)
            || stage == .stalled
        guard decodedFromStart, cutShort else { return "" }
        return " Bodies are decoded (\(setting(.decodesCompression))): each attempt asks for the body "
            + "from its start again, so a connection that keeps dropping gets no further; without it, each attempt "
            + "continues where the last one stopped."
    }

    /// What the user can do about a file-system failure; `kept` says the partial file is kept.
    func fileSystemAdvice(kept: String, setting: (Setting) -> String) -> String {
        if isOutOfDescriptors {
            return "The process has no file descriptor left: raise its open-files limit (ulimit -n) or lower "
                + "\(setting(.maxConcurrentDownloads)).\(url == nil ? "" : " Haul retries the download\(kept).")"
        }
        if wroteThrough {
            return errno == EPIPE
                ? "Download again with a reader that takes the whole body; the body starts from its first byte."
                : "Fix the destination (space, permissions), then download again; what was written through it "
                    + "cannot be resumed, so the body starts from its first byte."
        }
        if nothingKept && errno == ENOENT && url != nil {
            return "Keep the state directory while downloads run; the download starts again from zero."
        }
        if isOutOfSpace, let path {
            // The folder, for the user to free space in: the file's own name is Haul's.
            let folder = FilePath.directory(of: path)
            // ENOSPC is also a file system out of inodes with blocks to spare (`df -h` shows room).
            return
                "The disk\(errno == EDQUOT ? " quota" : "") holding '\(folder.isEmpty ? "." : folder)' is full (no space, "
                + "or no inode for another file): free space there (or choose another folder), then resume\(kept)."
        }
        return "Free space or fix permissions, then resume\(kept)."
    }

    /// The status's name, for errors.
    static func reason(forStatus status: Int?) -> String {
        switch status {
        case 401: " (unauthorized)"
        case 403: " (forbidden)"
        case 404: " (not found)"
        case 407: " (proxy authentication required)"
        case 410: " (gone)"
        case 416: " (range not satisfiable)"
        case 429: " (too many requests)"
        case let status? where status >= 500: " (server error)"
        default: ""
        }
    }

    /// What the user can do about an HTTP error status.
    static func advice(forStatus status: Int?, setting: (Setting) -> String) -> String {
        switch status {
        case 401, 403: "Check that the URL is public or that its credentials are right."
        case 404, 410: "Check the URL: the server has no file there."
        case 407:
            "Give the proxy's user name and password in its URL (\(setting(.proxy)) "
                + "http://user:password@proxy:port)."
        case 429: "The server asks for fewer requests; try again later."
        case let status? where status >= 500: "The server has a problem; try again later."
        default: "Check the URL."
        }
    }
}
