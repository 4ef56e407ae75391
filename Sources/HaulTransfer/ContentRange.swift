/// A parsed `Content-Range` response header (RFC 9110 §14.4), bytes unit only.
///
/// ```
/// bytes 0-499/1234   → .range(first: 0, last: 499, total: 1234)
/// bytes 0-499/*      → .range(first: 0, last: 499, total: nil)
/// bytes */1234       → .unsatisfied(total: 1234)          (sent with 416)
/// ```
/// Anything else (another unit, a missing dash, `last < first`, `last >= total`, signs, overflow)
/// is `nil`: a response whose range cannot be read is never appended to a partial file.
enum ContentRange: Equatable, Sendable {
    case range(first: Int64, last: Int64, total: Int64?)
    case unsatisfied(total: Int64)

    /// Parses a header value; `nil` when it is not a valid bytes Content-Range.
    init?(_ value: some StringProtocol) {
        var rest = Substring(value).trimmedWhitespace
        guard rest.count > 6, rest.prefix(6).lowercased() == "bytes " else { return nil }
        rest = rest.dropFirst(6).trimmedWhitespace
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        let rangePart = rest[..<slash].trimmedWhitespace
        let totalPart = rest[rest.index(after: slash)...].trimmedWhitespace

        let total: Int64?
        if totalPart == "*" {
            total = nil
        } else {
            guard let parsed = Self.digits(totalPart) else { return nil }
            total = parsed
        }

        if rangePart == "*" {
            guard let total else { return nil }
            self = .unsatisfied(total: total)
            return
        }
        guard let dash = rangePart.firstIndex(of: "-"),
            let first = Self.digits(rangePart[..<dash]),
            let last = Self.digits(rangePart[rangePart.index(after: dash)...]),
            first <= last
        else { return nil }
        if let total, last >= total { return nil }
        self = .range(first: first, last: last, total: total)
    }

    /// A non-negative decimal made of ASCII digits only, without overflow.
    private static func digits(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int64(text)
    }
}
