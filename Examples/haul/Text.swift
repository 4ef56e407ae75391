import FoundationEssentials
import Glibc

// What the CLI took from the whole of Foundation (String(format:), NSString, percent decoding): the
// CLI links FoundationEssentials only, like the library, which keeps about 7 MB of Foundation and ICU
// out of every `haul` process. JSON comes from FoundationEssentials' JSONEncoder (`JSONEvent`).

extension StringProtocol {
    /// Without leading and trailing white space (spaces, tabs, line breaks, Unicode spaces).
    var trimmingSpaces: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }) else { return "" }
        let last = lastIndex(where: { !$0.isWhitespace })!
        return String(self[first...last])
    }

    /// `%XX` sequences decoded as UTF-8; `nil` when one is malformed or the bytes are not UTF-8.
    var percentDecoded: String? {
        var bytes: [UInt8] = []
        var iterator = utf8.makeIterator()
        func hex(_ byte: UInt8?) -> UInt8? {
            switch byte {
            case let digit? where digit >= UInt8(ascii: "0") && digit <= UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case let letter? where letter >= UInt8(ascii: "a") && letter <= UInt8(ascii: "f"):
                letter - UInt8(ascii: "a") + 10
            case let letter? where letter >= UInt8(ascii: "A") && letter <= UInt8(ascii: "F"):
                letter - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = hex(iterator.next()), let low = hex(iterator.next()) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Cut or padded with spaces on the right to `length` characters.
    func padded(to length: Int) -> String {
        count >= length ? String(prefix(length)) : String(self) + String(repeating: " ", count: length - count)
    }
}

/// printf-style numbers, through the C library's `vsnprintf` (what `String(format:)` did for these).
enum Format {
    /// `value` with one decimal (`%.1f`).
    static func tenths(_ value: Double) -> String { c("%.1f", value) }

    /// `value` with at least `width` digits, zeros in front (`%0*d`).
    static func zeroPadded(_ value: Int, width: Int) -> String { c("%0*ld", Int32(width), value) }

    /// `value` right-aligned in `width` columns (`%*d`).
    static func rightAligned(_ value: Int, width: Int) -> String { c("%*ld", Int32(width), value) }

    private static func c(_ format: String, _ arguments: any CVarArg...) -> String {
        withVaList(arguments) { list in
            var text = [CChar](repeating: 0, count: 400)
            let count = Int(vsnprintf(&text, text.count, format, list))
            return String(
                decoding: text.prefix(max(0, min(count, text.count - 1))).map { UInt8(bitPattern: $0) },
                as: UTF8.self
            )
        }
    }
}
