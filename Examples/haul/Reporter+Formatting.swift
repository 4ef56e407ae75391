import Dispatch
import FoundationEssentials
import Glibc
import Haul
import Synchronization

/// Sizes, rates, durations and warnings in words.
extension Reporter {
    // MARK: formatting

    static func size(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : "\(Format.tenths(value)) \(units[unit])"
    }

    static func duration(_ duration: Duration) -> String {
        let seconds = Int(duration.components.seconds)
        if seconds >= 3600 { return "\(seconds / 3600)h\(Format.zeroPadded(seconds % 3600 / 60, width: 2))m" }
        if seconds >= 60 { return "\(seconds / 60)m\(Format.zeroPadded(seconds % 60, width: 2))s" }
        return "\(seconds)s"
    }

    /// Why a download started over, with what the user can do about it.
    static func explain(_ reason: RestartReason) -> String {
        switch reason {
        case .noValidator:
            "\(reason); started over (--resume-unvalidated would continue it after checking its last bytes)"
        default: "\(reason); started over"
        }
    }

    /// A warning, with what the user can do about it.
    static func explain(_ warning: DownloadWarning) -> String {
        switch warning {
        case .unrequestedContentEncoding:
            "\(warning) (--compressed asks for such bodies and decodes them)"
        case .urlDropped, .repeatedBytesReadPast: "\(warning)"
        case .versionsDiffer: "\(warning) (-x 1 asks for one connection from the start)"
        case .insecureRedirect: "\(warning); --checksum proves the file whatever the way"
        }
    }

    /// `url` as haul prints it: without a user name or password (`http://user:secret@h/x` →
    /// `http://h/x`), which must never reach the terminal, a log or `--json`.
    static func shown(_ url: String) -> String {
        let trimmed = url.trimmingSpaces
        // Credentials sit in the authority, before an "@": without one there is nothing to remove
        // (and no URL to parse, which was most of a rerun's cost over 100,000 finished URLs).
        // (Read by byte: ":", "/", "?", "#" and "@" are ASCII.)
        let bytes = trimmed.utf8
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[colon...].starts(with: "://".utf8) else {
            return trimmed
        }
        let authorityStart = bytes.index(colon, offsetBy: 3)
        let authority = bytes[authorityStart...].prefix {
            $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#")
        }
        guard let at = authority.lastIndex(of: UInt8(ascii: "@")) else { return trimmed }
        guard var components = URLComponents(string: trimmed) else {
            // Not parseable: drop anything between the scheme and the "@" all the same.
            return String(trimmed[..<authorityStart]) + String(trimmed[bytes.index(after: at)...])
        }
        guard components.user != nil || components.password != nil else { return trimmed }
        components.user = nil
        components.password = nil
        return components.string ?? trimmed
    }

    /// A retry's delay: tenths under ten seconds.
    static func delay(_ duration: Duration) -> String {
        let seconds = Self.seconds(duration)
        return seconds < 10 ? "\(Format.tenths(seconds))s" : Self.duration(duration)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Set once, before anything is written, when the body goes to standard output (`-o -`):
    /// everything haul says goes to standard error then, as curl's progress does.
    nonisolated(unsafe) static var bodyOnStandardOutput = false

    static func write(_ text: String, to descriptor: Int32) {
        // nonisolated(unsafe) above: written once by `run()` before any reporter or task exists.
        let descriptor = descriptor == STDOUT_FILENO && bodyOnStandardOutput ? STDERR_FILENO : descriptor
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                offset += written
            }
        }
    }

    /// The columns of the terminal on `descriptor` (80 when it says none).
    static func terminalWidth(of descriptor: Int32 = STDOUT_FILENO) -> Int {
        var size = winsize()
        if ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }
}
