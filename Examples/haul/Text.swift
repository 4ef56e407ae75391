import FoundationEssentials
import Glibc

// What the CLI took from the whole of Foundation (String(format:), NSString, percent decoding): the
// CLI links FoundationEssentials only, like the library, which keeps about 7 MB of Foundation and ICU
// out of every `haul` process. JSON comes from FoundationEssentials' JSONEncoder (`JSONEvent`).

extension Substring {
    /// Without leading and trailing white space (spaces, tabs, line breaks, Unicode spaces), as a
    /// slice of this text (no copy).
    var trimmedSpaces: Substring {
        // Most text starts and ends with a printable ASCII byte: no Character needs to be formed.
        // (On a generic StringProtocol, `utf8.reversed()` copied every byte of the text into an array.)
        if let first = utf8.first, let last = utf8.last, (0x21..<0x7F).contains(first), (0x21..<0x7F).contains(last) {
            return self
        }
        guard let first = firstIndex(where: { !$0.isWhitespace }) else { return self[endIndex...] }
        let last = lastIndex(where: { !$0.isWhitespace })!
        return self[first...last]
    }

    /// ``trimmedSpaces`` as a string of its own.
    var trimmingSpaces: String { String(trimmedSpaces) }
}

extension String {
    /// Without leading and trailing white space (spaces, tabs, line breaks, Unicode spaces).
    var trimmingSpaces: String { self[...].trimmingSpaces }
}

extension StringProtocol {
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

/// Terminal columns: what a line of text takes on screen (2 for wide East Asian characters and
/// emoji, 0 for combining marks), so that a bar never wraps.
enum Text {
    static func columns(of scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        if value >= 0x20 && value < 0x7F { return 1 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if scalar.properties.isEmojiPresentation { return 2 }
        let wide: [ClosedRange<UInt32>] = [
            0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
            0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
            0xFFE0...0xFFE6, 0x20000...0x3FFFD,
        ]
        return wide.contains { $0.contains(value) } ? 2 : 1
    }

    static func columns(of text: String) -> Int {
        text.unicodeScalars.reduce(0) { $0 + columns(of: $1) }
    }

    /// `text` cut to at most `limit` columns (whole characters only).
    static func truncated(_ text: String, toColumns limit: Int) -> String {
        var used = 0
        var result = ""
        for character in text {
            let width = character.unicodeScalars.reduce(0) { $0 + columns(of: $1) }
            if used + width > limit { break }
            used += width
            result.append(character)
        }
        return result
    }
}
