import FoundationEssentials
import Glibc

/// printf-style numbers, through the C library's `vsnprintf` (what `String(format:)` did for these).
enum Format {
    /// `value` with one decimal (`%.1f`).
    static func tenths(_ value: Double) -> String { c("%.1f", value) }

    /// `value` with `digits` decimals (`%.*f`).
    static func decimals(_ value: Double, _ digits: Int) -> String { c("%.*f", Int32(digits), value) }

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
