import Glibc

/// What `ps` and `/proc/PID/cmdline` show of this process: haul's arguments, with the secrets in them
/// blanked as curl blanks its own (`-u`, `--proxy-user`) — header values (`-H 'Name: value'`), `-u`'s password and the
/// passwords of URLs (a download's, `--proxy`'s, `--queue`'s) become `*`s in place, once haul has
/// read its arguments. (They are visible for the first milliseconds of the run; `header=` lines in an
/// input file never are.)
enum ProcessTitle {
    /// Overwrites the secrets in the process's own argument strings.
    static func blankSecrets() {
        var headerNext = false
        var cookieNext = false
        for index in 1..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[index] else { continue }
            let bytes = UnsafeMutableBufferPointer(
                start: UnsafeMutableRawPointer(pointer).assumingMemoryBound(to: UInt8.self),
                count: strlen(pointer)
            )
            let text = String(decoding: bytes, as: UTF8.self)
            // A header's value, and -u's password: after the first colon.
            if headerNext {
                blankHeaderValue(bytes, from: 0)
            } else if text.hasPrefix("--header=") {
                blankHeaderValue(bytes, from: "--header=".utf8.count)
            } else if text.hasPrefix("--user=") {
                blankHeaderValue(bytes, from: "--user=".utf8.count)
            } else if text.hasPrefix("-H") || text.hasPrefix("-u"), text.utf8.count > 2, !text.hasPrefix("--") {
                blankHeaderValue(bytes, from: 2)
            }
            if cookieNext || text.hasPrefix("--cookie=") || (text.hasPrefix("-b") && text.utf8.count > 2) {
                // -b 'name=value; …': every cookie's value.
                blankCookieValues(bytes)
            }
            headerNext = ["-H", "--header", "-u", "--user"].contains(text)
            cookieNext = ["-b", "--cookie", "--load-cookies"].contains(text)
            blankURLPasswords(bytes)
        }
    }

    /// `Name: value` from `start`: the value's bytes become `*`.
    static func blankHeaderValue(_ bytes: UnsafeMutableBufferPointer<UInt8>, from start: Int) {
        guard start < bytes.count, let colon = bytes[start...].firstIndex(of: UInt8(ascii: ":")) else { return }
        for index in (colon + 1)..<bytes.count where bytes[index] != UInt8(ascii: " ") {
            bytes[index] = UInt8(ascii: "*")
        }
    }

    /// `name=value; name=value`: each value's bytes become `*` (a file's path, with no `=`, stays).
    static func blankCookieValues(_ bytes: UnsafeMutableBufferPointer<UInt8>) {
        var inValue = false
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "="): inValue = true
            case UInt8(ascii: ";"): inValue = false
            case UInt8(ascii: " "): continue
            default: if inValue { bytes[index] = UInt8(ascii: "*") }
            }
        }
    }

    /// Every `scheme://user:password@host`: the password's bytes become `*`.
    static func blankURLPasswords(_ bytes: UnsafeMutableBufferPointer<UInt8>) {
        var index = 0
        while index + 3 <= bytes.count {
            guard bytes[index] == UInt8(ascii: ":"), bytes[index + 1] == UInt8(ascii: "/"),
                bytes[index + 2] == UInt8(ascii: "/")
            else {
                index += 1
                continue
            }
            let authority = index + 3
            var end = authority
            while end < bytes.count, ![UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")].contains(bytes[end]) {
                end += 1
            }
            if let at = bytes[authority..<end].lastIndex(of: UInt8(ascii: "@")),
                let colon = bytes[authority..<at].firstIndex(of: UInt8(ascii: ":"))
            {
                for position in (colon + 1)..<at { bytes[position] = UInt8(ascii: "*") }
            }
            index = end
        }
    }
}
