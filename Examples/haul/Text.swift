import FoundationEssentials
import Glibc

// What the CLI took from the whole of Foundation (String(format:), JSONSerialization, NSString,
// percent decoding): the CLI links FoundationEssentials only, like the library, which keeps about
// 7 MB of Foundation and ICU out of every `haul` process.

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

/// `null` in ``JSONLine``.
struct JSONNull {}

/// One JSON object on one line, keys sorted, slashes not escaped: what `--json` prints. Values are
/// strings, integers, doubles (non-finite ones as `null`), booleans or ``JSONNull``.
enum JSONLine {
    static func encode(_ object: [String: Any]) -> String {
        let fields = object.keys.sorted().map { key in "\(quoted(key)):\(value(object[key]!))" }
        return "{\(fields.joined(separator: ","))}"
    }

    private static func value(_ value: Any) -> String {
        switch value {
        case let text as String: quoted(text)
        case let number as Int: String(number)
        case let number as Int64: String(number)
        case let number as Double: number.isFinite ? "\(number)" : "null"
        case let flag as Bool: flag ? "true" : "false"
        default: "null"
        }
    }

    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
