import CHaul
import Logging

/// Every request's and response's header lines, logged at debug level as curl reads and writes them
/// (``DownloadManager/Configuration/logsHeaders``; `haul -v`): `> ` lines sent, `< ` lines received.
/// A value is shown only for the headers that never carry a secret (`Host`, `Range`, `ETag`…): an
/// `Authorization` (a URL's password becomes one), a cookie, a token or any header the caller gave
/// is logged as `<redacted>`. Called on the loop thread by curl's debug callback.
package final class HeaderLog: @unchecked Sendable {
    // @unchecked Sendable: a logger, written by one loop thread.
    let logger: Logger

    package init(logger: Logger) {
        self.logger = logger
    }

    /// Request headers whose values are shown; any other one sent is the caller's or a credential.
    static let shownRequestHeaders: Set<String> = [
        "host", "user-agent", "accept", "accept-encoding", "range", "if-range", "if-none-match",
        "if-modified-since", "connection", "te", "content-length", "proxy-connection", "keep-alive",
    ]
    /// Response headers whose values are hidden: they hand the client a secret.
    static let hiddenResponseHeaders: Set<String> = ["set-cookie", "set-cookie2", "authentication-info"]

    /// `line` as it may be logged (no line break): a header's value hidden unless it is shown.
    static func redacted(_ line: Substring, sent: Bool) -> String {
        // A header's name is a token: a line whose colon comes after a space is a request or status line.
        guard let colon = line.firstIndex(of: ":"), !line[..<colon].contains(where: \.isWhitespace),
            colon > line.startIndex
        else { return String(line) }
        let name = line[..<colon].lowercased()
        let hidden = sent ? !shownRequestHeaders.contains(name) : hiddenResponseHeaders.contains(name)
        return hidden ? "\(line[..<colon]): <redacted>" : String(line)
    }

    /// curl's debug callback: header blocks out (`CURLINFO_HEADER_OUT`), header lines in
    /// (`CURLINFO_HEADER_IN`); everything else (bodies, TLS, curl's own text) is not logged.
    static let callback: CHaul_debug_callback = { _, type, data, size, context in
        guard let context, let data, type == CURLINFO_HEADER_OUT || type == CURLINFO_HEADER_IN else { return 0 }
        let log = Unmanaged<HeaderLog>.fromOpaque(context).takeUnretainedValue()
        let sent = type == CURLINFO_HEADER_OUT
        let text = String(decoding: UnsafeRawBufferPointer(start: data, count: size), as: UTF8.self)
        // (`\r\n` is one Character: `isNewline` knows it.)
        let lines = text.split(whereSeparator: \.isNewline).filter { !$0.allSatisfy(\.isWhitespace) }
        guard !lines.isEmpty else { return 0 }
        let shown = lines.map { (sent ? "> " : "< ") + redacted($0, sent: sent) }.joined(separator: "\n")
        log.logger.debug("\(shown)", metadata: ["haul.headers": "\(sent ? "sent" : "received")"])
        return 0
    }
}
