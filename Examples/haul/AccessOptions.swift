import ArgumentParser
import FoundationEssentials
import Glibc
import Haul

/// Who haul's requests say they are and what they carry besides: `-H`, `-u`, `-b`, the `.netrc`.
/// Shared by `haul` and `haul worker` (a fleet's queue holds none of it: each worker is given its
/// own). Read on every run, never stored; headers and cookies go to each URL's own origin only.
struct AccessOptions: ParsableArguments {
    @Option(
        name: [.customShort("H", allowingJoined: true), .long],
        help: ArgumentHelp(
            "A header for every request, as \"Name: value\" (\"Name;\" for an empty value), or @FILE: one per line; repeatable.",
            discussion:
                "Sent to the URL's own origin only, never after a redirect to another host, and never written under .haul/. "
                + "A value given here is blanked in the process's title, but shows in `ps` for a moment and in shell "
                + "history: @FILE (or header= in an input file) keeps a secret off the command line entirely."
        )
    )
    var header: [String] = []

    @Option(
        name: [.customShort("u", allowingJoined: true), .customLong("user")],
        help: """
            USER[:PASSWORD] for every URL (HTTP authentication, as curl -u); without a password, \
            asked for on a terminal, else read from HAUL_PASSWORD. Never stored.
            """
    )
    var user: String?

    @Option(
        name: [.customShort("b", allowingJoined: true), .customLong("cookie"), .customLong("load-cookies")],
        help: """
            Cookies from FILE (Netscape format, as curl -b, wget and aria2c --load-cookies), sent where \
            their domain and path say; or 'name=value; …' sent to the URLs' own hosts. Never stored.
            """
    )
    var cookie: String?

    @Option(
        name: .long,
        help: "Read passwords from FILE instead of ~/.netrc (machine HOST login NAME password SECRET)."
    )
    var netrcFile: String?

    @Flag(name: .long, help: "Do not read ~/.netrc (it is read by default, as wget and aria2c do).")
    var noNetrc = false

    /// Whether any of these was given (`haul --queue` refuses them: a shared queue stores no secret).
    var given: [String] {
        [
            (!header.isEmpty, "-H"), (user != nil, "-u"), (cookie != nil, "-b"), (netrcFile != nil, "--netrc-file"),
        ].filter(\.0).map(\.1)
    }

    func validate() throws {
        if let user, user.isEmpty || user.hasPrefix(":") {
            throw ValidationError("-u needs a user name: -u NAME[:PASSWORD].")
        }
        if let cookie, HaulCommand.cookieIsFile(cookie), !FileManager.default.isReadableFile(atPath: cookie) {
            throw ValidationError("-b '\(cookie)' cannot be read: give a cookie file, or name=value.")
        }
        if noNetrc, netrcFile != nil { throw ValidationError("Give one of --netrc-file, --no-netrc.") }
        let lines: [String]
        do { lines = try headerLines() } catch { throw ValidationError("-H: \(error)") }
        for line in lines {
            if case .failure(let problem) = HaulCommand.parseHeader(line) { throw ValidationError("-H: \(problem)") }
        }
    }

    /// The `-H` values, each as given, or for `@FILE` each line of that file that is not blank
    /// (curl's form; a trailing CR is dropped): read on every run, never stored.
    func headerLines() throws(CLIError) -> [String] {
        var lines: [String] = []
        for value in header {
            guard value.hasPrefix("@") else {
                lines.append(value)
                continue
            }
            let file = try HaulCommand.readText(
                of: String(value.dropFirst()),
                named: "the header file",
                holding: "headers"
            )
            for line in file.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
                let text = line.hasSuffix("\r") ? String(line.dropLast()) : String(line)
                if !text.trimmingSpaces.isEmpty { lines.append(text) }
            }
        }
        return lines
    }

    /// The headers and cookies into `configuration`: the manager sends them to each URL's own
    /// origin only, never after a redirect to another (validated by ``validate()``).
    func apply(to configuration: inout DownloadManager.Configuration) {
        configuration.headers = ((try? headerLines()) ?? []).compactMap { try? HaulCommand.parseHeader($0).get() }
        if let cookie {
            if HaulCommand.cookieIsFile(cookie) {
                configuration.cookieFile = URL(fileURLWithPath: cookie)
            } else {
                // curl's `-b 'name=value'`: a header of the download's own origin, never stored.
                configuration.headers.append(DownloadHeader("Cookie", cookie))
            }
        }
    }
}

/// curl's `-n`/`--netrc`, accepted by `haul` and `haul worker` (the `.netrc` is read anyway), apart
/// from ``AccessOptions`` because `haul load`'s `-n` is the number of downloads, as `hey`'s.
struct NetrcFlag: ParsableArguments {
    @Flag(name: [.customShort("n"), .customLong("netrc")], help: "Accepted (as curl -n): ~/.netrc is read anyway.")
    var netrc = false

    /// Refuses `-n` beside `access`'s `--no-netrc`.
    func validate(with access: AccessOptions) throws {
        if netrc, access.noNetrc { throw ValidationError("Give one of -n (--netrc), --no-netrc.") }
    }
}
