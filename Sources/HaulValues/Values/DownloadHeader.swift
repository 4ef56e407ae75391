/// A header sent with a download's requests, as the layers below carry it (the facade's public
/// `DownloadHeader` says what each field means). The values of sensitive headers never appear in
/// descriptions, logs, errors or events.
package struct DownloadHeader: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The header's name, as given (HTTP compares names without case).
    package var name: String
    /// The header's value.
    package var value: String
    /// Whether the value is a secret: shown as `<redacted>`. `Authorization`, `Cookie`, `Set-Cookie`,
    /// `Proxy-Authorization` and names that contain `token`, `secret`, `key`, `password` or `auth`
    /// are sensitive whatever this says.
    package var isSensitive: Bool

    /// A header `name: value`; mark it `sensitive` when its value is a secret that its name does
    /// not give away (`Authorization`, `Cookie` and the like are sensitive anyway).
    /// A header as the facade's was made.
    package init(name: String, value: String, isSensitive: Bool) {
        (self.name, self.value, self.isSensitive) = (name, value, isSensitive)
    }

    package init(_ name: String, _ value: String, sensitive: Bool = false) {
        self.name = name
        self.value = value
        self.isSensitive = sensitive || Self.isSensitiveName(name)
    }

    /// `Authorization: Bearer <token>`.
    package static func authorization(bearer token: String) -> DownloadHeader {
        DownloadHeader("Authorization", "Bearer \(token)", sensitive: true)
    }

    /// `Cookie: <value>`.
    package static func cookie(_ value: String) -> DownloadHeader {
        DownloadHeader("Cookie", value, sensitive: true)
    }

    /// `Name: value`, or `Name: <redacted>` for a sensitive header.
    package var description: String { "\(name): \(isSensitive ? "<redacted>" : value)" }
    /// `DownloadHeader(Name: value)`, redacted as ``description`` is.
    package var debugDescription: String { "DownloadHeader(\(description))" }

    /// Its name and, unless sensitive, its value: what `dump` and debuggers show.
    package var customMirror: Mirror {
        Mirror(self, children: ["name": name, "value": isSensitive ? "<redacted>" : value, "isSensitive": isSensitive])
    }

    /// Whether a header of this name holds a secret by its name alone.
    static func isSensitiveName(_ name: String) -> Bool {
        // A name is ASCII (a token) but for a caller's mistake: compared byte by byte, lowered in
        // place. (`String.contains` of a string cost about 2 µs a call here, and a response's headers
        // are checked for every body `data(from:)` returns: 124 µs of a body's 310, issue 61.)
        var bytes = Array(name.utf8)
        guard bytes.allSatisfy({ $0 < 0x80 }) else { return isSensitiveUnicodeName(name) }
        for index in bytes.indices where bytes[index] >= 0x41 && bytes[index] <= 0x5A { bytes[index] |= 0x20 }
        if sensitiveNames.contains(where: { $0.elementsEqual(bytes) }) { return true }
        return sensitiveWords.contains { word in
            bytes.count >= word.count
                && (0...(bytes.count - word.count)).contains { start in
                    bytes[start..<(start + word.count)].elementsEqual(word)
                }
        }
    }

    /// The names that are secrets whole, and the words that make a name one, lowered.
    private static let sensitiveNameStrings = ["authorization", "cookie", "set-cookie", "proxy-authorization"]
    private static let sensitiveWordStrings = ["token", "secret", "key", "password", "auth", "session", "signature"]
    /// The same, as bytes.
    private static let sensitiveNames = sensitiveNameStrings.map { Array($0.utf8) }
    private static let sensitiveWords = sensitiveWordStrings.map { Array($0.utf8) }

    /// ``isSensitiveName(_:)`` for a name that is not ASCII, lowered as Unicode says (the Kelvin sign
    /// lowers to `k`: `\u{212A}ey` is a key).
    private static func isSensitiveUnicodeName(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return sensitiveNameStrings.contains(lowered) || sensitiveWordStrings.contains { lowered.contains($0) }
    }

    /// Headers Haul sets itself to pin a resume to one version of the file, or that would change
    /// the bytes it receives: a caller's would break resuming (see ``DownloadError/Code/invalidHeader``).
    static let reservedNames: Set<String> = [
        "range", "if-range", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since",
        "accept-encoding", "te", "transfer-encoding", "content-length", "connection", "upgrade", "expect",
    ]

    /// What keeps this header from being sent, in words that never include its value, or `nil`
    /// when it can be: its name must be a token, its value must hold no line break or NUL, and it
    /// must not be one Haul sets itself (`Range`, `If-Range`, the other conditionals,
    /// `Accept-Encoding`, `Content-Length`, `Transfer-Encoding`, `TE`, `Connection`, `Upgrade`,
    /// `Expect`). A download or manager given such a header throws `.invalidHeader`.
    package func problem() -> String? {
        guard !name.isEmpty else { return "a header has an empty name" }
        // RFC 9110 §5.6.2: a name is a token.
        let tokenPunctuation = Set("!#$%&'*+-.^_`|~".utf8)
        for byte in name.utf8 {
            let isAlphanumeric =
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            guard isAlphanumeric || tokenPunctuation.contains(byte) else {
                return "the header name '\(name.redactingControlCharacters)' has a character a header name cannot have"
            }
        }
        if Self.reservedNames.contains(name.lowercased()) {
            let advice =
                name.lowercased() == "accept-encoding"
                ? "use decodesCompression (haul --compressed) to ask for compressed bodies"
                : "Haul sets it to resume and validate the file"
            return "the header '\(name)' cannot be set by a request: \(advice)"
        }
        // A CR or LF would start another header (header injection); NUL ends the C string.
        if value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0x00 }) {
            return "the value of the header '\(name)' contains a line break or NUL"
        }
        return nil
    }

    /// Throws `.invalidHeader` (attributed to `url`) for the first of `headers` that cannot be sent
    /// (``problem()``).
    package static func check(_ headers: [DownloadHeader], url: String?) throws(DownloadError) {
        if let problem = headers.lazy.compactMap({ $0.problem() }).first {
            throw DownloadError(code: .invalidHeader, url: url, detail: problem)
        }
    }

    /// The line curl sends: `Name: value`, or `Name;` for an empty value (curl drops `Name:`).
    package var line: String { value.isEmpty ? "\(name);" : "\(name): \(value)" }

    /// `defaults` with `overrides` put over them: an override replaces every default of its name.
    package static func merged(_ defaults: [DownloadHeader], _ overrides: [DownloadHeader]) -> [DownloadHeader] {
        guard !defaults.isEmpty else { return overrides }
        guard !overrides.isEmpty else { return defaults }
        let replaced = Set(overrides.map { $0.name.lowercased() })
        return defaults.filter { !replaced.contains($0.name.lowercased()) } + overrides
    }
}

extension String {
    /// The string with control characters shown as `?`, for messages.
    var redactingControlCharacters: String {
        String(String.UnicodeScalarView(unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 }))
    }
}
