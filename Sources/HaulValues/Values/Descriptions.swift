import FoundationEssentials

// The values a caller prints (`print(progress)`, `"\(event)"`, a log line) read as a person reads
// them: sizes in binary units, rates per second, durations in the unit that suits them. No URL here
// carries a user name or password (the values hold none; a URL is shown redacted all the same).

extension DownloadProgress: CustomStringConvertible {
    /// "4.0 MiB of 32.0 MiB, 12.0 MiB/s, 3 s left" (the parts not known yet are left out; a
    /// download over several connections says how many).
    package var description: String {
        var text = HumanUnits.bytes(bytesReceived)
        if let totalBytes { text += " of " + HumanUnits.bytes(totalBytes) }
        if bytesPerSecond > 0 { text += ", " + HumanUnits.bytes(Int64(bytesPerSecond.rounded())) + "/s" }
        if let estimatedTimeRemaining { text += ", " + HumanUnits.timeLeft(estimatedTimeRemaining) + " left" }
        if connections > 1 { text += ", \(connections) connections" }
        return text
    }
}

extension ResponseRecord: CustomStringConvertible {
    /// "206 from https://example.com/big.iso, application/x-iso9660-image, 32.0 MiB, ETag "abc"".
    package var description: String {
        var parts = ["\(status) from \(url.redactedString)"]
        if let contentType { parts.append(contentType) }
        if let totalBytes { parts.append(HumanUnits.bytes(totalBytes)) }
        if let entityTag { parts.append("ETag \(entityTag)") }
        if let lastModified { parts.append("Last-Modified \(lastModified)") }
        return parts.joined(separator: ", ")
    }
}

/// Sizes, rates and durations in words, for the values' descriptions.
package enum HumanUnits {
    /// "512 bytes", "4.0 KiB", "32.0 MiB", "4.4 GiB".
    package static func bytes(_ count: Int64) -> String {
        guard count >= 1024 || count <= -1024 else { return count == 1 ? "1 byte" : "\(count) bytes" }
        var value = Double(count) / 1024
        for unit in ["KiB", "MiB", "GiB", "TiB"] {
            if abs(value) < 1024 || unit == "TiB" { return oneDecimal(value) + " " + unit }
            value /= 1024
        }
        return oneDecimal(value) + " TiB"
    }

    /// "850 µs", "14 ms", "1.25 s", "2 min 5 s", "1 h 2 min".
    package static func duration(_ duration: Duration) -> String {
        let seconds = duration.inSeconds
        if seconds < 0.001 { return "\(Int((seconds * 1_000_000).rounded())) µs" }
        if seconds < 1 { return "\(Int((seconds * 1000).rounded())) ms" }
        if seconds < 60 {
            let hundredths = Int((seconds * 100).rounded())
            let fraction = hundredths % 100
            return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction) s"
        }
        return timeLeft(duration)
    }

    /// Whole seconds, minutes and hours: "3 s", "2 min 5 s", "1 h 2 min".
    static func timeLeft(_ duration: Duration) -> String {
        let seconds = max(0, Int(duration.inSeconds.rounded()))
        if seconds < 60 { return "\(seconds) s" }
        if seconds < 3600 { return "\(seconds / 60) min \(seconds % 60) s" }
        return "\(seconds / 3600) h \(seconds % 3600 / 60) min"
    }

    /// One digit after the point: "4.0", "12.5".
    static func oneDecimal(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        let sign = tenths < 0 ? "-" : ""
        return "\(sign)\(abs(tenths) / 10).\(abs(tenths) % 10)"
    }
}
