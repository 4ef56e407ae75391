import FoundationEssentials
import Glibc

/// A `.netrc` as curl (`-n`), wget and aria2c read it: `machine HOST login NAME password SECRET`,
/// `default` for any other host, `macdef` definitions skipped, tokens separated by any white space
/// (one entry per line or all on one). Its passwords are secrets: never shown, never stored.
struct Netrc: Equatable {
    struct Credentials: Equatable {
        var login: String?
        var password: String?
    }

    /// By host name, lowercased: the first entry of a host wins, as with curl.
    var machines: [String: Credentials] = [:]
    /// `default`'s, for a host no `machine` names.
    var fallback: Credentials?

    /// Reads `text`.
    init(parsing text: String) {
        var tokens = Self.tokens(of: text)[...]
        var current: Credentials?
        var currentHost: String?  // nil with `current` set: `default`
        func finish() {
            guard let entry = current else { return }
            if let host = currentHost {
                if machines[host] == nil { machines[host] = entry }
            } else if fallback == nil {
                fallback = entry
            }
            current = nil
        }
        while let token = tokens.popFirst() {
            switch token {
            case "machine":
                finish()
                guard let host = tokens.popFirst() else { break }
                (current, currentHost) = (Credentials(), host.lowercased())
            case "default":
                finish()
                (current, currentHost) = (Credentials(), nil)
            case "login" where current != nil:
                current?.login = tokens.popFirst()
            case "password" where current != nil:
                current?.password = tokens.popFirst()
            case "account" where current != nil:
                _ = tokens.popFirst()
            case "macdef":
                finish()
                _ = tokens.popFirst()  // its name; its body was left out by `tokens(of:)`
            default:
                continue
            }
        }
        finish()
    }

    /// The credentials for `host`: its `machine`'s, else `default`'s.
    func credentials(forHost host: String) -> Credentials? {
        machines[host.lowercased()] ?? fallback
    }

    /// The file's tokens, a `macdef`'s body (up to the next blank line) left out; `"…"` quotes a
    /// token with spaces, as curl reads it.
    private static func tokens(of text: String) -> [String] {
        var tokens: [String] = []
        var inMacro = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if inMacro {
                if line.allSatisfy(\.isWhitespace) { inMacro = false }
                continue
            }
            var current = ""
            var quoted = false
            var hasToken = false
            for character in line {
                if character == "\"" {
                    quoted.toggle()
                    hasToken = true
                } else if character.isWhitespace && !quoted {
                    if hasToken { tokens.append(current) }
                    (current, hasToken) = ("", false)
                } else {
                    current.append(character)
                    hasToken = true
                }
            }
            if hasToken { tokens.append(current) }
            if let index = tokens.lastIndex(of: "macdef"), index >= tokens.count - 2 { inMacro = true }
        }
        return tokens
    }

    /// The file at `path`, or `nil` when there is none (no warning) or it cannot be used: a file
    /// others may read is refused with a warning (its passwords are no longer secret), as curl warns.
    static func load(path: String, warn: (String) -> Void) -> Netrc? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        guard status.st_mode & S_IFMT == S_IFREG else {
            warn("haul: '\(path)' is not a file; it is not read for passwords")
            return nil
        }
        guard status.st_mode & 0o077 == 0 else {
            warn(
                "haul: '\(path)' can be read by other users, so its passwords are not used; "
                    + "make it yours alone: chmod 600 '\(path)'"
            )
            return nil
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            warn("haul: cannot read '\(path)': \(String(cString: strerror(errno)))")
            return nil
        }
        return Netrc(parsing: String(decoding: data, as: UTF8.self))
    }
}
