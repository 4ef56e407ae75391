import Foundation
import Glibc

/// One nginx for the whole test process, and a view of it per test (issue 75, item 2): a test that
/// only reads from nginx does not start a process of its own. A view has a folder of its own under
/// the shared root (`www/t-…/`): ``NginxServer/makeFile(_:size:seed:)`` and
/// ``NginxServer/root`` write there, ``NginxServer/url(_:)`` puts the folder after the location
/// (`slow/a.bin` → `slow/t-…/a.bin`, which the location's `alias` maps to the folder), and
/// ``NginxServer/accessLog()`` keeps the lines under the folder, with the folder taken out, so
/// that a test reads the URIs it asked for. The per-client connection limits (`/twoconn/`,
/// `/busy-page/`) count per view. What a view cannot share, a test gets by starting its own
/// (``startServerAndDirectory(inMemory:own:)``).
extension NginxServer {
    /// The shared server, started by the first test that asks; stopped as the process exits,
    /// before the leak check (``Watchdog``), which finds any view not stopped.
    static func shared() async throws -> NginxServer {
        try NginxServer(viewOf: await sharedServer.value)
    }

    private static let sharedServer = Task.detached { () throws -> NginxServer in
        let server = try await NginxServer.start(watched: false)
        // Registered after the watchdog's: exit handlers run last-registered first, so the server
        // stops before the leak check looks.
        _ = Watchdog.shared
        atexit { sharedServerIfStarted?.stop() }
        sharedServerIfStarted = server
        return server
    }

    /// Set once, before any test gets a view (read at exit only).
    nonisolated(unsafe) private static var sharedServerIfStarted: NginxServer?

    /// The locations that map a prefix of the URI onto the root (`alias`, `rewrite`): a view's
    /// folder goes after them. Longest first, where one is a prefix of another.
    private static let locations = [
        "slowest/", "slow/", "perconn/", "uneven/", "crawl/", "norange/", "gated-norange/", "gated/", "paced/",
        "held/", "private/", "precompressed/", "redirect/", "to-http/", "noetag/", "busy-page/", "twoconn/",
        "to-crawl/", "bearer-gated/", "bearer/", "cookie/", "apikey/", "cd/plain/", "cd/gated/", "cd/paced/",
        "cd/utf8/", "cd/traversal/", "cd/absolute/", "cd/dotfile/", "cd/control/", "cd/dots/", "to-bearer/",
        "to-other-origin/", "clean/", "chunked/",
    ]

    /// The URI path (without its leading `/`) that serves `path` of this server or view.
    func placed(_ path: String) -> String {
        guard let namespace else { return path }
        for location in Self.locations where path.hasPrefix(location) {
            return location + namespace + "/" + path.dropFirst(location.count)
        }
        return namespace + "/" + path
    }

    /// The URI (path and query) that ``accessLog()`` gives for a request of `url`: a view's folder
    /// taken out.
    func loggedURI(_ url: URL) -> String {
        let uri = url.path + (url.query.map { "?\($0)" } ?? "")
        guard let namespace else { return uri }
        return uri.replacingOccurrences(of: "/\(namespace)/", with: "/")
    }

    /// The access log's text from where this server's or view's lines start.
    func logText() -> String {
        guard let handle = FileHandle(forReadingAtPath: prefix.appendingPathComponent("logs/access.log").path)
        else { return "" }
        defer { try? handle.close() }
        guard (try? handle.seek(toOffset: logStart)) != nil, let data = try? handle.readToEnd() else { return "" }
        return String(decoding: data, as: UTF8.self)
    }

    /// A log line of this server, with a view's folder taken out of its URI; nil for another view's.
    func ownLine(_ line: Substring) -> String? {
        guard let namespace else { return String(line) }
        let uri = line.prefix { $0 != " " }
        guard let folder = uri.range(of: "/\(namespace)/") else { return nil }
        return line[..<folder.lowerBound] + "/" + line[folder.upperBound...]
    }

    /// A view's stop: its folder goes (a later request gets 404); the shared server runs on.
    func stopView() {
        guard view?.end() == true else { return }
        try? FileManager.default.removeItem(at: root)
    }
}
