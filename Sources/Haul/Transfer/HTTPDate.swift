import FoundationEssentials
import Glibc

/// HTTP dates (RFC 9110 §5.6.7): the IMF-fixdate every server sends now, and the obsolete RFC 850 and
/// asctime forms a recipient must still accept.
enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The date `text` names, or `nil` when it is none of the three forms. (Read by byte: every
    /// form is ASCII, and the loop parses a response's dates for every download.)
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        var low = 0
        var high = bytes.count
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
        while low < high, isSpace(bytes[low]) { low += 1 }
        while high > low, isSpace(bytes[high - 1]) { high -= 1 }
        let value = bytes[low..<high]
        let space = UInt8(ascii: " ")
        let fields: (day: ArraySlice<UInt8>, month: ArraySlice<UInt8>, year: ArraySlice<UInt8>, time: ArraySlice<UInt8>)
        if let comma = value.firstIndex(of: UInt8(ascii: ",")) {
            let parts = value[(comma + 1)...].split(separator: space)
            if parts.count == 5, parts[4].elementsEqual("GMT".utf8) {  // Sun, 06 Nov 1994 08:49:37 GMT
                fields = (parts[0], parts[1], parts[2], parts[3])
            } else if parts.count == 3, parts[2].elementsEqual("GMT".utf8) {  // Sunday, 06-Nov-94 08:49:37 GMT
                let date = parts[0].split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
                guard date.count == 3, date[2].count == 2 else { return nil }
                fields = (date[0], date[1], date[2], parts[1])
            } else {
                return nil
            }
        } else {  // Sun Nov  6 08:49:37 1994
            let parts = value.split(separator: space)
            guard parts.count == 5 else { return nil }
            fields = (parts[2], parts[1], parts[4], parts[3])
        }
        let clock = fields.time.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        guard fields.day.count <= 2, let day = number(fields.day), (1...31).contains(day),
            let month = months.firstIndex(where: { $0.utf8.elementsEqual(fields.month) }),
            fields.year.count == 2 || fields.year.count == 4, var year = number(fields.year),
            clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
            let hour = number(clock[0]), let minute = number(clock[1]), let second = number(clock[2]),
            hour < 24, minute < 60, second <= 60
        else { return nil }
        if fields.year.count == 2 { year += year < 70 ? 2000 : 1900 }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let seconds = timegm(&parts)
        guard parts.tm_mday == Int32(day) else { return nil }  // 31 Feb rolled over into March
        return Date(timeIntervalSince1970: Double(seconds))
    }

    /// Whether a `Last-Modified` may serve as a strong validator (RFC 9110 §8.8.2.2): only when the
    /// response's `Date` shows it at least 60 seconds old. A file changed twice within one second
    /// has one Last-Modified for two contents; one a minute old was not being written when it was sent.
    static func isStrong(lastModified: String?, date: String?) -> Bool {
        guard let lastModified, let date, let modified = parse(lastModified), let sent = parse(date) else {
            return false
        }
        return sent.timeIntervalSince1970 - modified.timeIntervalSince1970 >= 60
    }

    /// A decimal number of ASCII digits only (at most 4 here).
    private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 4 else { return nil }
        var value = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0") && digit <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
        }
        return value
    }
}
