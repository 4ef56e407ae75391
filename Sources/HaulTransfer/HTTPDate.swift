import CHaul
import FoundationEssentials

/// HTTP dates (RFC 9110 §5.6.7): the IMF-fixdate every server sends now, and the obsolete RFC 850 and
/// asctime forms a recipient must still accept.
enum HTTPDate {
    /// The date `text` names, or `nil` when it names none: libcurl's `curl_getdate`, the parser
    /// curl itself reads these headers with (the three forms of RFC 9110, and the zones and
    /// variants servers send). A date before 1970 reads as 1970.
    static func parse(_ text: String) -> Date? {
        if let seconds = fixdateSeconds(text) { return Date(timeIntervalSince1970: Double(seconds)) }
        let seconds = curl_getdate(text, nil)
        guard seconds != -1 else { return nil }
        return Date(timeIntervalSince1970: Double(seconds))
    }

    /// The seconds since 1970 of an exact IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, the form
    /// RFC 9110 makes servers send), read by byte; `nil` for anything else, which `curl_getdate`
    /// reads. Every response's `Last-Modified` and `Date` are read on the loop thread, and
    /// `curl_getdate` (a general parser of many forms) was 2 % of its time in benchmark (a). The day
    /// name must be one, but is not checked against the date, as curl does.
    static func fixdateSeconds(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { bytes -> Int64? in
            guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == 0x20, bytes[7] == 0x20,
                bytes[11] == 0x20, bytes[16] == 0x20, bytes[19] == UInt8(ascii: ":"),
                bytes[22] == UInt8(ascii: ":"), bytes[25] == 0x20, bytes[26] == UInt8(ascii: "G"),
                bytes[27] == UInt8(ascii: "M"), bytes[28] == UInt8(ascii: "T")
            else { return nil }
            func number(_ start: Int, _ count: Int) -> Int64? {
                var value: Int64 = 0
                for index in start..<start + count {
                    let digit = bytes[index] &- UInt8(ascii: "0")
                    guard digit < 10 else { return nil }
                    value = value * 10 + Int64(digit)
                }
                return value
            }
            guard let day = number(5, 2), let year = number(12, 4), let hour = number(17, 2),
                let minute = number(20, 2), let second = number(23, 2),
                let month = month(bytes[8], bytes[9], bytes[10]), isDayName(bytes[0], bytes[1], bytes[2]),
                (1...daysIn(month: month, year: year)).contains(day), year >= 1970, hour < 24, minute < 60,
                second < 61  // a leap second, as curl allows
            else { return nil }
            return daysSince1970(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second
        }
    }

    private static func month(_ a: UInt8, _ b: UInt8, _ c: UInt8) -> Int64? {
        switch (a, b, c) {
        case (0x4A, 0x61, 0x6E): 1  // Jan
        case (0x46, 0x65, 0x62): 2  // Feb
        case (0x4D, 0x61, 0x72): 3  // Mar
        case (0x41, 0x70, 0x72): 4  // Apr
        case (0x4D, 0x61, 0x79): 5  // May
        case (0x4A, 0x75, 0x6E): 6  // Jun
        case (0x4A, 0x75, 0x6C): 7  // Jul
        case (0x41, 0x75, 0x67): 8  // Aug
        case (0x53, 0x65, 0x70): 9  // Sep
        case (0x4F, 0x63, 0x74): 10  // Oct
        case (0x4E, 0x6F, 0x76): 11  // Nov
        case (0x44, 0x65, 0x63): 12  // Dec
        default: nil
        }
    }

    private static func isDayName(_ a: UInt8, _ b: UInt8, _ c: UInt8) -> Bool {
        switch (a, b, c) {
        case (0x4D, 0x6F, 0x6E), (0x54, 0x75, 0x65), (0x57, 0x65, 0x64), (0x54, 0x68, 0x75), (0x46, 0x72, 0x69),
            (0x53, 0x61, 0x74), (0x53, 0x75, 0x6E):
            true  // Mon Tue Wed Thu Fri Sat Sun
        default: false
        }
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
    /// `days_from_civil`).
    private static func daysSince1970(year: Int64, month: Int64, day: Int64) -> Int64 {
        let year = month <= 2 ? year - 1 : year
        let era = year / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
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
}
