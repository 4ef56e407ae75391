import CHaul
import FoundationEssentials

/// HTTP dates (RFC 9110 §5.6.7): the IMF-fixdate every server sends now, and the obsolete RFC 850 and
/// asctime forms a recipient must still accept.
enum HTTPDate {
    /// The date `text` names, or `nil` when it names none: libcurl's `curl_getdate`, the parser
    /// curl itself reads these headers with (the three forms of RFC 9110, and the zones and
    /// variants servers send). A date before 1970 reads as 1970.
    static func parse(_ text: String) -> Date? {
        let seconds = curl_getdate(text, nil)
        guard seconds != -1 else { return nil }
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
}
