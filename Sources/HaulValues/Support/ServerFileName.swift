import FoundationEssentials

/// File names that come from a server: `Content-Disposition` (RFC 6266, with RFC 5987's
/// `filename*=UTF-8''…`), or a URL's last path segment, made safe to create in a folder. Pure.
///
/// A safe name has no path separator, no control character (C0, DEL, C1) and no character that
/// reorders how a name is shown (the bidirectional controls: `evil\u{202E}txt.exe` would show as
/// `evilexe.txt`), does not start with a dot (`.`, `..`,
/// `.bashrc` and `.haul` get a `_` in front), is not empty, and is at most 255 bytes long (cut from
/// the front, which keeps the extension).
package enum ServerFileName {
    /// The name for a response: its `Content-Disposition` file name, else the last path segment of
    /// `url` (the final one, after redirects), else `index.html`; each made safe (``sanitized(_:)``).
    package static func choose(contentDisposition: String?, url: String?) -> String {
        if let header = contentDisposition, let name = fromContentDisposition(header).flatMap(sanitized) {
            return name
        }
        return url.map(fromURL) ?? "index.html"
    }

    /// The last path segment of `url`, percent-decoded and made safe (a separator it encoded,
    /// `%2F` or `%5C`, becomes `_`), or `index.html` when it has none (`https://host/`,
    /// `https://host/dir/`).
    package static func fromURL(_ url: String) -> String {
        var path = url
        if let components = URLComponents(string: url) {
            path = components.percentEncodedPath
        } else if let query = path.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            path = String(path[..<query])
        }
        let last = path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? ""
        let decoded = percentDecoded(last).flatMap { String(validating: $0, as: UTF8.self) } ?? last
        let flat = String(
            String.UnicodeScalarView(decoded.unicodeScalars.map { $0 == "/" || $0 == "\\" ? "_" : $0 })
        )
        return sanitized(flat) ?? "index.html"
    }

    /// The file name a `Content-Disposition` value gives, as sent (not yet made safe): `filename*`
    /// (RFC 5987: `charset'language'percent-encoded`, UTF-8 or ISO-8859-1) when present and
    /// readable, else `filename` (a token or a quoted string). `nil` when it names none.
    static func fromContentDisposition(_ value: String) -> String? {
        var parameters: [String: String] = [:]
        var rest = Substring(value)
        // The disposition type (attachment, inline, …) comes first; the name counts for any.
        guard let firstSemicolon = rest.firstIndex(of: ";") else { return nil }
        rest = rest[rest.index(after: firstSemicolon)...]
        while !rest.isEmpty {
            rest = rest.drop { $0 == " " || $0 == "\t" || $0 == ";" }
            guard let equals = rest.firstIndex(of: "=") else { break }
            let name = rest[..<equals].trimmingWhitespace.lowercased()
            rest = rest[rest.index(after: equals)...].drop { $0 == " " || $0 == "\t" }
            var parameter = ""
            if rest.first == "\"" {
                rest = rest.dropFirst()
                var escaped = false
                while let character = rest.first {
                    rest = rest.dropFirst()
                    if escaped {
                        parameter.append(character)
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        break
                    } else {
                        parameter.append(character)
                    }
                }
                rest = rest.drop { $0 != ";" }
            } else {
                let end = rest.firstIndex(of: ";") ?? rest.endIndex
                parameter = rest[..<end].trimmingWhitespace
                rest = rest[end...]
            }
            if parameters[name] == nil { parameters[name] = parameter }
        }
        if let extended = parameters["filename*"], let decoded = decodeExtendedValue(extended) { return decoded }
        return parameters["filename"]
    }

    /// RFC 5987's `charset'language'value`: the value's percent-encoded bytes read in the charset
    /// (UTF-8 or ISO-8859-1; `nil` for others or bytes that are not that charset).
    static func decodeExtendedValue(_ value: String) -> String? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = percentDecoded(String(parts[2])) else { return nil }
        switch parts[0].lowercased() {
        case "utf-8": return String(validating: bytes, as: UTF8.self)
        case "iso-8859-1": return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
        default: return nil
        }
    }

    /// `name` made safe to create in a folder, or `nil` when nothing of it is left. A path keeps
    /// its last component (`../../x` and `/etc/x` are `x`, as RFC 6266 §4.3 asks); control characters
    /// and bidirectional controls become `_`; a leading dot gets a `_` in front; the name is cut to
    /// 255 bytes from the front.
    package static func sanitized(_ name: String) -> String? {
        let last = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var safe = String(
            String.UnicodeScalarView(last.unicodeScalars.map { isUnsafe($0) ? "_" : $0 })
        ).trimmingWhitespace
        guard !safe.isEmpty else { return nil }
        if safe.hasPrefix(".") { safe = "_" + safe }
        return lastCharacters(of: safe, fitting: 255)
    }

    /// A control character (C0, DEL, C1), or a character that changes the order in which text is
    /// shown: the bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069),
    /// the marks (U+200E, U+200F, U+061C).
    static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: true
        default: false
        }
    }

    /// The last whole characters of `text` that fit in `limit` bytes of UTF-8: `text` cut from the
    /// front. Walks back from the end, so that a name of megabytes (a URL in an input file) costs its
    /// last `limit` bytes, not a copy of the rest per character removed.
    static func lastCharacters(of text: String, fitting limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var start = text.endIndex
        var bytes = 0
        while start > text.startIndex {
            let previous = text.index(before: start)
            let size = text.utf8.distance(from: previous, to: start)
            guard bytes + size <= limit else { break }
            bytes += size
            start = previous
        }
        return String(text[start...])
    }

    /// `name.counter`, with `name` shortened from the front so that the result still fits in 255
    /// bytes: the names tried after `name` is taken.
    package static func numbered(_ name: String, _ counter: Int) -> String {
        guard counter > 0 else { return name }
        let suffix = ".\(counter)"
        return lastCharacters(of: name, fitting: 255 - suffix.utf8.count) + suffix
    }

    /// The path in `folder` of the first of `name`, `name.1`, `name.2`… (from the `first`th) that
    /// `isTaken` does not refuse; `nil` when the first 10,000 are all taken.
    package static func firstFree<E: Error>(
        _ name: String,
        in folder: String,
        first: Int = 0,
        isTaken: (String) throws(E) -> Bool
    ) throws(E) -> String? {
        for counter in first..<10_000 {
            let candidate = numbered(name, counter)
            let path = folder == "/" ? "/\(candidate)" : "\(folder)/\(candidate)"
            if try !isTaken(path) { return path }
        }
        return nil
    }

    /// The last name ``firstFree(_:in:first:isTaken:)`` tries.
    package static let lastCounter = 9_999

    /// `%XX` sequences decoded; `nil` when one is malformed.
    static func percentDecoded(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        func hex(_ byte: UInt8?) -> UInt8? { byte.flatMap(Hexadecimal.value(ofDigit:)) }
        while let byte = iterator.next() {
            guard byte == 0x25 else {
                bytes.append(byte)
                continue
            }
            guard let high = hex(iterator.next()), let low = hex(iterator.next()) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }
}
