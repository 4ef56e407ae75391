import FoundationEssentials

extension URL {
    /// Whether it carries a user name or a password.
    package var hasCredentials: Bool { user != nil || password != nil }

    /// The URL as text with any user name and password removed, safe for logs, events and errors.
    package var redactedString: String {
        guard hasCredentials,
            var components = URLComponents(url: self, resolvingAgainstBaseURL: false)
        else { return absoluteString }
        components.user = nil
        components.password = nil
        return components.string ?? absoluteString
    }

    /// What identifies the resource: the URL without user name, password and fragment.
    package var identityString: String {
        guard hasCredentials || fragment != nil,
            var components = URLComponents(url: self, resolvingAgainstBaseURL: false)
        else { return absoluteString }
        components.user = nil
        components.password = nil
        components.fragment = nil
        return components.string ?? absoluteString
    }

    /// The key of per-host limits: `host:port`.
    package var hostKey: String { "\(host?.lowercased() ?? ""):\(portOrDefault)" }

    /// The port requests go to: the URL's, else its scheme's (443 for https, else 80).
    package var portOrDefault: Int { port ?? (scheme?.lowercased() == "https" ? 443 : 80) }
}

extension String {
    /// The text with the user name and password of every URL in it removed (`http://u:secret@h` →
    /// `http://h`): for messages that echo a URL, such as curl's "Unsupported proxy syntax in '…'".
    /// Credentials end at the last `@` before the URL's first `/`, `?`, `#`, quote or line end.
    package var redactingURLCredentials: String {
        guard contains("://"), contains("@") else { return self }
        let bytes = Array(utf8)
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = 0
        let stops: Set<UInt8> = Set("/?#'\"\n\r\t".utf8)
        while index < bytes.count {
            result.append(bytes[index])
            index += 1
            // Just after "://": drop what precedes the authority's last "@".
            guard result.count >= 3, result.suffix(3).elementsEqual("://".utf8) else { continue }
            var end = index
            while end < bytes.count, !stops.contains(bytes[end]) { end += 1 }
            if let at = bytes[index..<end].lastIndex(of: UInt8(ascii: "@")) { index = at + 1 }
        }
        return String(decoding: result, as: UTF8.self)
    }
}
