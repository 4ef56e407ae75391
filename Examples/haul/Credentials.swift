import FoundationEssentials
import Glibc

/// Who haul's requests say they are, as curl, wget and aria2c users give it: `-u USER:PASSWORD` for
/// every URL, else the `.netrc` entry of each URL's host; a URL that names its own user keeps it.
/// The credentials go into the URL, whose password the library keeps in memory only (never in the
/// journal, a log, an event or `--json`) and drops on a redirect to another origin.
struct Credentials: Sendable {
    /// `-u`'s.
    var user: (name: String, password: String)?
    /// The `.netrc` read, if any.
    var netrc: Netrc?

    /// `url` with the user and password known for it, when it names none.
    func apply(to url: URL) -> URL {
        guard url.user == nil, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            return url
        }
        let found: (name: String, password: String)?
        if let user {
            found = user
        } else if let host = url.host, let entry = netrc?.credentials(forHost: host), let login = entry.login,
            let password = entry.password
        {
            found = (login, password)
        } else {
            found = nil
        }
        guard let found else { return url }
        components.user = found.name
        components.password = found.password
        return components.url ?? url
    }
}

extension AccessOptions {
    /// The run's ``Credentials``: `-u` (a password not given is asked for on a terminal, else read
    /// from `HAUL_PASSWORD`), and unless `--no-netrc` the `.netrc` (`--netrc-file`, by default
    /// `~/.netrc`).
    func credentials() throws(CLIError) -> Credentials {
        var result = Credentials()
        if let user {
            if let colon = user.firstIndex(of: ":") {
                result.user = (String(user[..<colon]), String(user[user.index(after: colon)...]))
            } else if let password = ProcessInfo.processInfo.environment["HAUL_PASSWORD"] {
                result.user = (user, password)
            } else if isatty(STDIN_FILENO) == 1, let typed = getpass("Enter the password of '\(user)': ") {
                result.user = (user, String(cString: typed))
            } else {
                throw CLIError(
                    "-u \(user) gives no password: write -u \(user):PASSWORD, set HAUL_PASSWORD, or run haul in a "
                        + "terminal to be asked for it",
                    exitStatus: ExitStatus.usage
                )
            }
        }
        guard !noNetrc else { return result }
        let warn = { (message: String) in Reporter.write(message + "\n", to: STDERR_FILENO) }
        if let netrcFile {
            var status = stat()
            guard stat(netrcFile, &status) == 0 else {
                throw CLIError("cannot read the netrc file '\(netrcFile)': \(String(cString: strerror(errno)))")
            }
            result.netrc = Netrc.load(path: netrcFile, warn: warn)
        } else if let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty {
            result.netrc = Netrc.load(path: (home.hasSuffix("/") ? home : home + "/") + ".netrc", warn: warn)
        }
        return result
    }
}
