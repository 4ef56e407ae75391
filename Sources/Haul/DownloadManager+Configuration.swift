import CoreMetrics
import FoundationEssentials
import Glibc
import HaulIO
import HaulValues
import Logging
import Tracing

extension DownloadManager {
    /// How a manager runs its downloads.
    public struct Configuration: Sendable {
        /// How many downloads transfer at once; the others wait as rows of the journal, holding no
        /// object, connection, file descriptor or buffer. Default 16.
        ///
        /// A download whose bytes are all received gives its place to the next one while the disk
        /// makes its file durable and renames it (a sync takes milliseconds on a disk); as many more
        /// may wait on the disk at once, and admission waits when they do.
        ///
        /// At most half of the process's open-files limit (`RLIMIT_NOFILE`, raised to its hard limit
        /// when a manager starts, unless ``raisesOpenFilesLimit`` is off) runs at once, whatever is set here: each transfer holds a
        /// socket. With the common hard limit of 1,048,576 that is never reached; where the limit is
        /// lower, the manager logs the number it runs at.
        public var maxConcurrentDownloads: Int = 16
        /// How many downloads from one host (host and port) transfer at once, across all downloads;
        /// the queue skips to other hosts' downloads meanwhile. `nil` (the default): no limit but
        /// ``maxConcurrentDownloads``.
        public var maxConcurrentDownloadsPerHost: Int?
        /// How many connections one download may fetch its file over, by default (a request may ask
        /// for its own number, ``DownloadRequest/connections``). Default 1: a library is polite unless
        /// asked. With more, a file whose length is known from a server that honours ranges (and sends
        /// a strong validator) is split into segments no smaller than ``minimumSegmentSize``, each
        /// fetched with `Range: bytes=a-b` and written at its offset; a connection that finishes its
        /// segment takes the second half of the largest one left (aria2's dynamic split). Every
        /// answer must be the same file (its length and validator, with `If-Range`): one that is not
        /// restarts the download on the new version. Extra connections count against
        /// ``maxConcurrentDownloadsPerHost``, which they never exceed, and the open-files budget.
        /// Any other server is fetched over one connection.
        public var connectionsPerFile: Int = 1
        /// The smallest segment a file is split into for several connections (aria2's
        /// `--min-split-size`): a file is split only where each piece gets at least this many bytes.
        /// Default 4 MiB.
        public var minimumSegmentSize: Int64 = 4 * 1024 * 1024
        /// How many bytes are collected before a write to the partial file (YYDownload's
        /// `kBufferSize`). Progress counts written bytes only. Default 128 KiB. Buffers are one per
        /// slot at most, within 16 MiB (at least 2 MiB' worth, and 4 buffers, are allowed): more
        /// fast transfers than that write each chunk straight to their file, and slow ones always do.
        /// A buffer's pages are touched as bytes arrive (a 64 KiB file touches 64 KiB of one), and
        /// buffers left idle are unmapped within half a second.
        public var bufferSize: Int = 128 * 1024
        /// The shortest time between two `.progress` events of one download. Default 200 ms.
        public var progressInterval: Duration = .milliseconds(200)
        /// Whether a download whose length is known and larger than its buffer reserves the blocks
        /// of the whole file when its answer is accepted (`fallocate`, keeping the partial's length),
        /// so that a disk too small fails at the start with ENOSPC (its empty partial removed), not
        /// at 90 %. File systems that cannot preallocate are left to allocate as they write.
        /// Default `true`.
        public var preallocatesFiles = true
        /// Bandwidth limits in bytes per second: each download's (unless it has its own,
        /// ``DownloadRequest/maxBytesPerSecond``), each host's and the manager's, shared out by token
        /// buckets on the loop (a transfer over its budget is paused until the budget refills).
        /// Change them while the manager runs with ``DownloadManager/setRateLimits(_:)``. Default: none.
        public var rateLimits = RateLimits()
        /// Where partial files and the journal live. `nil` (the default) puts them in a `.haul` folder
        /// beside each destination, on the same file system so the final rename is atomic.
        ///
        /// When set, the manager opens this directory's journal at start (other managers and
        /// processes may have it open too; `.journalLocked` only while one holds it alone, taking it
        /// over) and restores every unfinished download in it: see ``resumesUnfinishedDownloads``.
        /// A download another live manager queued or runs is followed to its outcome, not fetched
        /// again; one whose manager is gone is taken back with its bytes.
        ///
        /// The directory is made private (0700) and must be this user's. A symbolic link of this
        /// user's named here is followed once, when the manager starts (it is the caller's choice);
        /// a link of another user's, a link named `.haul` (the default folder's name, wherever it is
        /// named), or a link in place of any file in a state directory is never followed: the
        /// manager or the download fails with ``DownloadError/Code-swift.struct/unsafeFile`` and
        /// nothing is made or written through it.
        public var stateDirectory: URL?
        /// For a manager with a ``stateDirectory``: whether downloads that were running or queued when
        /// the last process stopped (shut down, crashed or killed) continue at once. Downloads the user
        /// paused stay paused either way. Default `true`.
        public var resumesUnfinishedDownloads = true
        /// How often a receiving download's partial file is synced to stable storage (off the loop
        /// thread) and the synced length recorded: after a reboot, a partial is cut back to it. Pauses
        /// and shutdowns sync too. Default 5 s.
        public var checkpointInterval: Duration = .seconds(5)
        /// Whether a download whose destination already holds the complete file asks the server if it
        /// changed (If-None-Match / If-Modified-Since) instead of transferring nothing. A 304 keeps the
        /// file; a 200 fetches the new version and replaces it atomically. Default `false`.
        public var revalidatesCompletedFiles = false
        /// Whether a file found at a destination the journal has no row for (its state folder lost),
        /// which records on itself that it is this URL's download as Haul placed it (extended
        /// attributes: its origin and version), is checked against the server with one conditional
        /// request and kept on a 304, instead of being fetched again. Off: fetched again, as any file
        /// Haul does not know (a load test's bodies). Default `true`.
        public var recognizesPlacedFiles = true
        /// Where the manager's metrics go (swift-metrics; the names are in the README): by default
        /// the process's `MetricsSystem`, which records nothing until the application bootstraps a
        /// backend. A factory of its own keeps one manager's metrics apart (a test's `TestMetrics`).
        public var metricsFactory: (any MetricsFactory)?
        /// Where each attempt's span goes (swift-distributed-tracing): a span per request a download
        /// makes (with the redirects it follows), with OpenTelemetry's HTTP client attributes
        /// (`http.request.method`, `url.full` without credentials, `server.address`,
        /// `server.port`, `http.request.resend_count`, `http.response.status_code`,
        /// `http.response.body.size`), a child of the caller's `ServiceContext` when it asked for
        /// the download. By default `InstrumentationSystem.tracer`: nothing until the application
        /// bootstraps one.
        public var tracer: (any Tracer)?
        /// Whether a manager that starts sets SIGPIPE to be ignored in the whole process. Default
        /// `true`: a write to a connection the server closed raises SIGPIPE, which ends a process
        /// that neither ignores nor handles it; curl keeps it off its own socket writes, but not
        /// every TLS library's path does. Set `false` when the application ignores or handles
        /// SIGPIPE itself (as SwiftNIO servers do) and wants no library to change its signals.
        public var ignoresSIGPIPE = true
        /// Whether a manager that starts raises the process's open-files soft limit
        /// (`RLIMIT_NOFILE`) to its hard limit. Default `true`: each transfer holds a socket (and,
        /// between writes, its partial file), and the common soft limit of 1,024 would cap a
        /// manager at 512 transfers. With `false` the limit stays as the application set it, and
        /// the manager runs at most half of it at once (``maxConcurrentDownloads``).
        public var raisesOpenFilesLimit = true
        /// Tests inject another boot's id to simulate a reboot.
        var bootIDOverride: String?
        /// Tests inject a smaller open-files limit than the process's (see ``DescriptorBudget``).
        var openFilesLimitOverride: Int?
        /// The boot id journals are stamped with: this boot's, unless a test injects another.
        var bootID: String { bootIDOverride ?? Journal.currentBootID() }
        /// The longest wait for a connection. Default 30 s.
        public var connectTimeout: Duration = .seconds(30)
        /// How many consecutive attempts that fail transiently (connection refused or reset,
        /// timeout, a body cut short, HTTP 408, 429 or 5xx) without writing a byte are retried
        /// before the download fails; an attempt that wrote bytes resets the count. Every retry
        /// resumes from the bytes on disk. 0 turns retries off. Default 5.
        public var retryLimit = 5
        /// How many attempts that could not connect (refused, host or network unreachable, connect
        /// timeout) are retried while no server has answered the download yet: `nil` (the default)
        /// retries them as ``retryLimit`` says (a server that is restarting); 0 fails a wrong port
        /// or a host that is down at once, as curl and wget do (`haul` does, unless `--retries` is
        /// given). Once a server answered, a refused connection is retried as any transient failure.
        public var connectionRetryLimit: Int? = nil
        /// The delay before the first retry; each next one doubles it, up to ``maximumRetryDelay``,
        /// with a random part (between half and all of it). A server's `Retry-After` is honoured
        /// instead (up to an hour). An attempt cut after it brought at least 64 KiB (a connection
        /// dropped mid-body) is followed at once instead, within a tenth of this. Default 1 s.
        public var retryDelay: Duration = .seconds(1)
        /// The longest backoff between two attempts. Default 60 s.
        public var maximumRetryDelay: Duration = .seconds(60)
        /// A transfer that receives nothing for this long (whole seconds, at least 1) is aborted and
        /// retried. Time spent queued never counts. Default 30 s.
        public var stallTimeout: Duration = .seconds(30)
        /// Whether a partial file that no strong validator vouches for is continued. Off (the
        /// default), such a partial starts over with a `.restarted(.noValidator)` event. A strong
        /// validator is an ETag that is not weak, or a Last-Modified at least a minute older than the
        /// response's Date (RFC 9110 §8.8.2.2). Without one, a `Range` request alone would splice a
        /// file replaced in between onto the old bytes.
        ///
        /// On, the resume asks again for the 64 KiB before the partial's end and continues only if
        /// they equal the bytes on disk and the total length is unchanged; otherwise it starts over
        /// (`.restarted(.overlapMismatch)` or `.remoteChanged`). What this cannot see is a file that
        /// changed only in bytes before that stretch, or only after it, with the same length (an
        /// edited middle, an appended log rotated to the same size).
        ///
        /// A body that is not a file (``stream(from:headers:bufferLimit:)``, a FIFO or standard
        /// output, ``data(from:headers:maximumSize:)``) cannot start over once bytes went out: off,
        /// such a stream fails at the first interruption with `.streamCannotRestart`; on, it is
        /// checked the same way against its last 64 KiB, which a stream with no strong validator
        /// keeps in memory for this (a body in memory is checked against itself; a discarded body
        /// is counted again from its start).
        public var resumesWithoutValidator = false
        /// Whether requests ask for compressed bodies (`Accept-Encoding`) and decode them, so that
        /// the file holds the decoded bytes (as `curl --compressed`). Ranges count the encoded bytes,
        /// so a download interrupted in the middle starts over (`.restarted(.decodedBody)`); off (the
        /// default), nothing is asked for and a body a server encodes anyway is saved as sent, with a
        /// `.warning(.unrequestedContentEncoding)` event.
        public var decodesCompression = false
        /// Whether a finished file gets the server's `Last-Modified` as its modification time (as
        /// `curl -R` and wget do); without one, or off (the default), it keeps the time it was written.
        public var setsModificationTimeFromServer = false
        /// The largest file a download accepts, in bytes: a larger announced length, or a body that
        /// grows past it, fails the download with `.fileTooLarge`. `nil` (the default): no limit.
        public var maximumFileSize: Int64?
        /// A PEM file of certificate authorities to verify HTTPS servers with, instead of the
        /// system's. Verification itself is never turned off.
        public var certificateAuthorityFile: URL?
        /// A file of cookies in the Netscape format (curl's `-b FILE`, wget's and aria2c's
        /// `--load-cookies`, a browser's export): each request sends the ones whose domain, path,
        /// `secure` flag and expiry say so, through libcurl's cookie engine (which also keeps what
        /// responses set, in memory). The file is read, never written. Cookie values are secrets as
        /// header values are: never stored, logged as `<redacted>` (``logsHeaders``).
        public var cookieFile: URL?
        /// How many redirects a download follows. Default 10.
        public var maximumRedirects: Int = 10
        /// How many downloads share one HTTP/2 connection at most; more downloads from the host open
        /// another connection. Default 8: libcurl 7.88's multi-socket API runs every transfer of a
        /// connection on each of its socket events, so the CPU spent per event grows with the streams
        /// on it (10,000 files of 64 KiB at 100 in flight over HTTPS: 5.2-5.5 s on one connection,
        /// 3.0-3.4 s on connections of 8 streams). Connections are opened as the streams need them,
        /// as `h2load -m` does: a host's downloads wait for its first answer to say whether it
        /// multiplexes, then start while the connections known to carry it have a free stream, and
        /// beyond that open new ones, at most as many at once as are known, never more than
        /// `ceil(downloads at once / maxStreamsPerConnection)`; a host whose first answer takes over
        /// 2 s lets the others go without it. (libcurl 7.88 alone gave each download
        /// admitted while a connection was being set up one of its own: 1,000 at once to one host
        /// opened 993 connections; 125 now, as h2load's.)
        public var maxStreamsPerConnection: Int = 8
        /// Whether requests over https offer HTTP/2 (ALPN): where the server takes it, downloads
        /// from one host share its connections as streams (``maxStreamsPerConnection``). `false`:
        /// HTTP/1.1 for every request, as `curl --http1.1` (a load test of an HTTP/1.1 path, a
        /// server whose HTTP/2 misbehaves). Plain http is HTTP/1.1 either way. Default `true`.
        public var usesHTTP2 = true
        /// The User-Agent header.
        public var userAgent: String = "Haul/\(DownloadManager.version)"
        /// Headers sent with every download's requests (an API token for one service, a tenant id);
        /// a request's own header of the same name replaces one of these
        /// (``DownloadRequest/headers``). Never written to disk; checked when the manager starts
        /// (`.invalidHeader`). See ``DownloadHeader`` for redirects.
        public var headers: [DownloadHeader] = []
        /// Gives back the header values of a download restored from the journal, which records their
        /// names only: asked once when such a download is admitted by a process that was not given
        /// its headers (``DownloadRequest/headers``). What it throws fails the download with
        /// `.headersUnavailable`, as a download restored without a provider fails: it is never sent
        /// without its headers. Called off the loop thread; the download holds its slot meanwhile.
        ///
        /// ```swift
        /// configuration.headerProvider = { needed in
        ///     [.authorization(bearer: try await tokens.current(for: needed.url))]
        /// }
        /// ```
        public var headerProvider: (@Sendable (HeadersNeeded) async throws -> [DownloadHeader])?
        /// Gives a fresh URL (and headers) for a download whose URL answered 401, 403 or 410: a
        /// signed S3, GCS or CDN link that expired in the middle of a large file. The download
        /// continues from its bytes on disk at the new URL if its answer proves the same file (the
        /// bytes before the resume point, the length, and the validator on record), with a
        /// `.switchedURL` event; an answer that is another file drops the URL
        /// (`.warning(.urlDropped)`) and the download goes on as the 401/403/410 says. Asked once
        /// per failure streak (a fresh URL refused too is not refreshed again until bytes
        /// arrive). Returning `nil`, or throwing, keeps the old behaviour: the status fails the
        /// download (after its mirrors, if it has any). `nil` (the default): no hook. Called off the
        /// loop thread; the download holds its slot meanwhile.
        ///
        /// ```swift
        /// configuration.urlRefresher = { expired in
        ///     FreshURL(try await storage.presignedURL(for: expired.destination.lastPathComponent))
        /// }
        /// ```
        public var urlRefresher: (@Sendable (ExpiredURL) async throws -> FreshURL?)?
        /// A proxy for every request, as `http://[user:password@]host:port` (`https://` for a TLS
        /// proxy; `socks5h://`, `socks5://`, `socks4a://`, `socks4://` too). An `https` URL goes
        /// through it in a `CONNECT` tunnel. Its credentials stay in memory, and are never logged or
        /// shown in errors. `nil` (the default): the proxy the environment names, as curl reads it
        /// (`http_proxy`, `https_proxy` or `HTTPS_PROXY`, `all_proxy`, with `no_proxy`; never
        /// `HTTP_PROXY` in capitals, which a CGI request can set), unless
        /// ``ignoresProxyEnvironment``.
        public var proxy: URL?
        /// Whether the proxy environment variables are ignored: without ``proxy``, every request goes
        /// directly. Default `false`.
        public var ignoresProxyEnvironment = false
        /// Hosts reached directly, not through the proxy, in `no_proxy`'s form: a host name (which
        /// also matches its subdomains), an IP address, or `*` for every host. `nil` (the default):
        /// the environment's `no_proxy`, unless ``ignoresProxyEnvironment``.
        public var proxyBypass: [String]?
        /// Whether every request's and response's header lines are logged to ``logger`` at debug level
        /// (curl's `-v`; `haul -v`): `> ` lines sent, `< ` lines received, one message per request and
        /// per response line. A header's value is logged only for headers that never carry a secret
        /// (`Host`, `Range`, `If-Range`, `User-Agent`… sent; all but `Set-Cookie` received): the
        /// headers given (``headers``, a request's), an `Authorization` made of a URL's password and
        /// cookies show as `<redacted>`. Off by default: each request then costs curl's debug output.
        public var logsHeaders = false
        /// Where the manager logs; by default nowhere.
        public var logger: Logger = Logger(label: "haul", factory: { _ in SwiftLogNoOpLogHandler() })

        /// The defaults.
        public init() {}

        /// The same configuration with every value in its allowed range.
        var normalized: Configuration {
            var configuration = self
            configuration.maxConcurrentDownloads = max(1, maxConcurrentDownloads)
            configuration.maxConcurrentDownloadsPerHost = maxConcurrentDownloadsPerHost.map { max(1, $0) }
            configuration.bufferSize = max(4096, bufferSize)
            configuration.connectionsPerFile = min(64, max(1, connectionsPerFile))
            configuration.minimumSegmentSize = max(64 * 1024, minimumSegmentSize)
            configuration.maxStreamsPerConnection = max(1, maxStreamsPerConnection)
            return configuration
        }
    }

    /// A download restored from the journal whose header values its process does not have, as
    /// ``Configuration/headerProvider`` is asked for them.
    public struct HeadersNeeded: Sendable {
        /// The download.
        public let id: DownloadID
        /// Its URL, without user name and password.
        public let url: URL
        /// Its destination.
        public let destination: URL
        /// The names of the headers it was queued with, as given then.
        public let names: [String]
    }

    /// A download whose URL answered 401, 403 or 410, as ``Configuration/urlRefresher`` is asked
    /// for a fresh one.
    public struct ExpiredURL: Sendable {
        /// The download.
        public let id: DownloadID
        /// The URL that answered, without user name and password.
        public let url: URL
        /// Its destination (its folder, for one that takes its name from the server and has none yet).
        public let destination: URL
        /// The status it answered: 401, 403 or 410.
        public let status: Int
    }

    /// What ``Configuration/urlRefresher`` gives: a URL for the same file, and the headers to send
    /// there instead of the download's (`nil`: the same ones).
    public struct FreshURL: Sendable {
        /// An absolute `http` or `https` URL.
        public var url: URL
        /// The headers for it, instead of the download's own (the manager's are added).
        public var headers: [DownloadHeader]?

        /// A fresh `url`, with `headers` instead of the download's when given.
        public init(_ url: URL, headers: [DownloadHeader]? = nil) {
            self.url = url
            self.headers = headers
        }
    }

    /// The state directory of a destination in `folder` when no ``Configuration/stateDirectory`` is
    /// set: a `.haul` folder beside it, on the same file system, so that the final rename is atomic.
    ///
    /// - Parameter folder: the destination's folder, as a path.
    /// - Returns: the state directory's path.
    public static func defaultStateDirectory(besideFolder folder: String) -> String {
        FilePath.stateDirectory(besideFolder: folder)
    }

    /// ``Configuration/stateDirectory`` as a standardised path, through the symbolic link it may
    /// name (the caller's choice, followed once here; the journal never follows one).
    static func configuredStateDirectory(_ configuration: Configuration) -> String? {
        configuration.stateDirectory.map(stateDirectoryPath)
    }

    /// A state directory the caller names, as a standardised path through the link it may be, when
    /// the caller could have made that link: one of this user's, not named `.haul`. A link of
    /// another user's (planted in a shared folder), or any link in place of a `.haul` folder (where
    /// a default state folder is looked for), is not followed: the journal's own check refuses it
    /// (``PrivateFile/checkFolder(_:)``), and nothing is made where it leads.
    static func stateDirectoryPath(_ url: URL) -> String {
        let path = url.standardizedFileURL.path
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFLNK else { return path }
        guard status.st_uid == geteuid(), FilePath.lastComponent(of: path) != ConfinedPath.stateFolderName else {
            return path
        }
        return FilePath.linkTarget(of: path) ?? path
    }
}
