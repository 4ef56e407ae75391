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
    var identityString: String {
        guard hasCredentials || fragment != nil,
            var components = URLComponents(url: self, resolvingAgainstBaseURL: false)
        else { return absoluteString }
        components.user = nil
        components.password = nil
        components.fragment = nil
        return components.string ?? absoluteString
    }

    /// The key of per-host limits: `host:port`.
    package var hostKey: String {
        let host = host?.lowercased() ?? ""
        let port = port ?? (scheme?.lowercased() == "https" ? 443 : 80)
        return "\(host):\(port)"
    }
}
