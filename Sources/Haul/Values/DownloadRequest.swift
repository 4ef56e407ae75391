import FoundationEssentials
import HaulValues
import Logging

/// One download to queue with ``DownloadManager/enqueue(_:)``.
public struct DownloadRequest: Sendable, Hashable {
    /// An absolute `http` or `https` URL.
    public var url: URL {
        didSet { if takesFileNameFromServer, key == nil { identify() } }
    }
    /// Where the whole file goes; or, when ``takesFileNameFromServer``, the folder it goes into.
    ///
    /// The file appears there only whole, by rename. A symbolic link there is followed, as curl, wget
    /// and aria2c write through one: the file is placed at the link's target (through a chain of
    /// links; a dangling link names the file to create), its partial file and state directory are
    /// beside the target, and the link stays; ``Download/destination`` is the target.
    ///
    /// A character device, a FIFO or a Unix socket there (or a link to one), and this process's own
    /// descriptors (`/dev/stdout`, `/dev/fd/N`), are written through: the body goes to it in order as
    /// it arrives, with no partial file, no rename and nothing made beside it, and it stays what it
    /// was. A FIFO is opened when the download is asked for, which waits for its reader (as curl
    /// does); a reader that falls behind holds the transfer, so memory stays bounded. Such a
    /// download resumes within its process only (a dropped connection continues with `Range` and
    /// `If-Range`), and fails with ``DownloadError/Code-swift.struct/streamCannotRestart`` rather
    /// than start over, since bytes written cannot be taken back; it takes no checksum. Its row is
    /// kept in the configured state directory, or else in a folder of the manager's own that is
    /// removed when it shuts down. A block device is never written, nor replaced: the request throws
    /// ``DownloadError/Code-swift.struct/unsupportedDestination``.
    public var destination: URL {
        didSet { identify(destinationPath: FilePath.standardized(destination)) }
    }
    /// Whether the finished file replaces a file at ``destination`` (`true`, the default: the caller
    /// named the file, as `curl -o` does). `false` where the name was chosen for the caller (from
    /// the URL, an input file, a template): a file that is at the destination when the download is
    /// placed, made there by someone else meanwhile, is kept, and the download goes to `name.1`,
    /// `name.2`… instead (``Download/destination`` tells where), placed without a moment when either
    /// could be lost (`renameat2` with `RENAME_NOREPLACE`). The file Haul placed there itself for this
    /// download is replaced all the same. Recorded in the journal. A download that takes its name
    /// from the server (``takesFileNameFromServer``) always keeps what it did not place.
    public var replacesExistingFile = true
    /// Whether a file at ``destination`` that Haul did not download is continued (`wget -c`,
    /// `aria2c -c`, `curl -C -`), `false` by default: its bytes are copied into the partial file and
    /// the request asks for the rest, with the last 64 KiB before its end again, which must be the
    /// file's (``DownloadManager/Configuration/resumesWithoutValidator``'s check, for this request
    /// only); a server that ignores the range, an overlap that differs or an answer of another length
    /// fetches the file whole. The file stays as it is until the download completes and replaces it
    /// (whatever ``replacesExistingFile`` says: it is the file this request continues). Nothing is
    /// continued for a file Haul's journal records (its own partial file goes on), a destination
    /// that is not a regular file, or one that ``takesFileNameFromServer``.
    public var continuesExistingFile = false
    /// Higher priorities are admitted first; first in, first out within one priority.
    public var priority: Int
    /// The whole file's expected digest, checked before it is moved into place: a mismatch fails
    /// the download with `.checksumMismatch`, deletes the partial and leaves the destination alone.
    public var checksum: Checksum?
    /// The file's expected length: a server announcing another fails the download at once
    /// (`.checksumMismatch`), and the finished file is checked against it.
    public var expectedSize: Int64?
    /// The `User-Agent` of this download's requests, instead of the manager's
    /// (``DownloadManager/Configuration/userAgent``). Recorded in the journal: a download restored
    /// by a later process keeps it.
    public var userAgent: String?
    /// Headers for this download's requests (a token, a cookie), over the manager's
    /// (``DownloadManager/Configuration/headers``): one of the same name replaces the manager's.
    /// Only their names are recorded in the journal; see ``DownloadHeader`` for what happens on
    /// redirects and after a restart.
    public var headers: [DownloadHeader]
    /// Whether ``destination`` is a folder and the file's name comes from the server: the first
    /// response's `Content-Disposition` (RFC 6266, `filename*=UTF-8''…` of RFC 5987 first), else
    /// the last path segment of its URL after redirects, else `index.html`. The name is made safe
    /// (no path, no control character, no leading dot, at most 255 bytes), never replaces a file
    /// Haul did not download there (`name.1`, `name.2`… instead), is chosen before the first byte is
    /// written, and is recorded: it stays across resumes and restarts. ``Download/destination``
    /// tells it. Such a download is its folder and URL (its id is theirs), as a download to a file
    /// is its file. Off by default (as `wget --content-disposition`).
    public var takesFileNameFromServer = false {
        didSet { if takesFileNameFromServer != oldValue { identify() } }
    }
    /// What makes a download that takes its file name from the server the same download when it is
    /// asked for again (its id, with its folder): by default its URL, without user name, password
    /// and fragment. Give a key of your own (an object's name, a database id) when the URL changes
    /// between requests, as a signed link does, so that the bytes on disk continue (if the new URL's
    /// answer proves the same file) instead of starting a second download. A download to a file is
    /// its file, whatever its URL; this is not used for it.
    public var key: String? {
        didSet { if takesFileNameFromServer { identify() } }
    }
    /// This download's bandwidth limit in bytes per second, instead of the manager's default per
    /// download (``RateLimits/perDownload``); the host's and the manager's limits still hold.
    /// Recorded in the journal; ``Download/setMaxBytesPerSecond(_:)`` changes it while it runs.
    public var maxBytesPerSecond: Int64?
    /// How many connections this download may fetch its file over, instead of the manager's
    /// ``DownloadManager/Configuration/connectionsPerFile`` (1 to 64). Recorded in the journal.
    public var connections: Int?
    /// Other URLs of the same file, tried in order after ``url`` when a failure another URL may not
    /// have ends a request there (connection refused, a 5xx or a 404 on one mirror, a stall; see
    /// ``DownloadError/movesToAnotherURL``), before the retry policy's delays. The bytes on disk
    /// continue at a mirror only if its answer proves the same file: the 64 KiB before the resume
    /// point again, the same length, and the same strong validator when both send one (`If-Range`).
    /// A mirror whose answer is another file is not used again by this attempt
    /// (`.warning(.urlDropped)`); nothing it sent is spliced. `.switchedURL` events say which URL
    /// is in use. Recorded in the journal (without user names and passwords, which stay in memory).
    public var mirrors: [URL] = []
    /// The folder the destination must stay inside, for a name someone else wrote (an input file's
    /// `out=`, a shared queue's row): when the file is placed, the folders on the way from this one
    /// to it are opened one by one, never through a symbolic link another user made and never out
    /// of it, and missing ones are made there; a destination that would leave it fails with
    /// ``DownloadError/Code-swift.struct/unsupportedDestination``. ``ConfinedPath`` checks such a name before
    /// it is queued. Kept in memory with the request, not in the journal. `nil`: no such rule.
    public var confinedTo: String?
    /// Whether the body is read, counted and thrown away, never written (``discarding(_:headers:)``).
    public private(set) var discardsBody = false
    /// Set when its id was made for it alone (``giveUniqueID()``: random, not derived from its
    /// destination), to the id's first 64 bits: part of its equality, so two such requests are two
    /// downloads there too.
    private var uniqueToken: UInt64?
    /// Whether its id was made for it alone (``giveUniqueID()``).
    package var hasUniqueID: Bool { uniqueToken != nil }
    /// Where its body is collected, for a body asked for in memory (a request that discards its body
    /// to any destination).
    package var collector: BodyCollector? {
        get { collectorBox.value }
        set { collectorBox.value = newValue }
    }
    private var collectorBox = Unhashed<BodyCollector?>(value: nil)
    /// The logger of this download's messages, instead of the manager's
    /// (``DownloadManager/Configuration/logger``), as AsyncHTTPClient takes one per request: its
    /// metadata (a request id, a trace id) comes with every message, beside Haul's
    /// `haul.download.id`. Kept in memory only: a download restored by a later process logs to
    /// that manager's logger. Not part of a request's equality.
    public var logger: Logger? {
        get { loggerBox.value }
        set { loggerBox.value = newValue }
    }
    private var loggerBox = Unhashed<Logger?>(value: nil)

    /// The id of the download this request asks for: its destination's (``DownloadID/init(destination:)``),
    /// or for one that takes its file name from the server, its folder's and its ``key`` or URL's.
    /// Two requests with one id are one download. Lets a caller of ``DownloadManager/enqueue(_:)``
    /// follow its requests on ``DownloadManager/events`` without a handle for each.
    public var id: DownloadID { DownloadID(identity.value.id) }
    /// ``id`` as the layers below know it, as the request keeps it.
    package var engineID: HaulValues.DownloadID { identity.value.id }
    /// The standardised path of ``destination``, as the id was derived from it: the manager's
    /// checks and its row use it again.
    package var destinationPath: String { identity.value.destinationPath }
    /// ``id`` and ``destinationPath``, derived once per change of what they are made of rather than
    /// at every read: `haul` reads the id to follow a request, and the manager both to write its
    /// row (a SHA-256 and a file URL's path each time; the path alone was a tenth of a rerun of
    /// `haul` over 100,000 finished URLs).
    private var identity = Unhashed(value: Identity(id: HaulValues.DownloadID(rawValue: ""), destinationPath: ""))
    private struct Identity: Sendable {
        var id: HaulValues.DownloadID
        var destinationPath: String
    }

    /// Derives the id again; `destinationPath` when the destination changed (otherwise the path
    /// stays: a change of the URL, the key or the kind of request leaves it as it was).
    private mutating func identify(destinationPath: String? = nil) {
        guard uniqueToken == nil else { return }  // its own id, whatever is set after
        let path = destinationPath ?? identity.value.destinationPath
        let id =
            if !takesFileNameFromServer {
                HaulValues.DownloadID(destinationPath: path)
            } else {
                key.map { HaulValues.DownloadID(key: $0, folderPath: path) }
                    ?? HaulValues.DownloadID(url: url, folderPath: path)
            }
        identity.value = Identity(id: id, destinationPath: path)
    }

    /// A request for `url` into `folder`, under the name the server gives
    /// (``takesFileNameFromServer``).
    public init(
        url: URL,
        folder: URL,
        priority: Int = 0,
        checksum: Checksum? = nil,
        expectedSize: Int64? = nil,
        userAgent: String? = nil,
        headers: [DownloadHeader] = []
    ) {
        self.init(
            url: url,
            destination: folder,
            takesFileNameFromServer: true,
            priority: priority,
            checksum: checksum,
            expectedSize: expectedSize,
            userAgent: userAgent,
            headers: headers
        )
    }

    /// A request for `url` to `destination`.
    public init(
        url: URL,
        destination: URL,
        priority: Int = 0,
        checksum: Checksum? = nil,
        expectedSize: Int64? = nil,
        userAgent: String? = nil,
        headers: [DownloadHeader] = []
    ) {
        self.init(
            url: url,
            destination: destination,
            takesFileNameFromServer: false,
            priority: priority,
            checksum: checksum,
            expectedSize: expectedSize,
            userAgent: userAgent,
            headers: headers
        )
    }

    /// Both public initialisers: the id is derived once, for the kind of request it is (observers
    /// do not run in an initialiser, and a folder's request made as a file's first hashed twice).
    private init(
        url: URL,
        destination: URL,
        takesFileNameFromServer: Bool,
        priority: Int,
        checksum: Checksum?,
        expectedSize: Int64?,
        userAgent: String?,
        headers: [DownloadHeader]
    ) {
        self.url = url
        self.destination = destination
        self.takesFileNameFromServer = takesFileNameFromServer
        self.priority = priority
        self.checksum = checksum
        self.expectedSize = expectedSize
        self.userAgent = userAgent
        self.headers = headers
        identify(destinationPath: FilePath.standardized(destination))
    }
}

extension DownloadRequest {
    /// A request whose body is read and counted, never written: a load test's, or a warm-up's.
    ///
    /// It is fetched as any download is (a slot, the per-host and rate limits, retries, resumes from
    /// the byte after the last one counted, metrics), its ``Download/destination`` is `/dev/null`,
    /// and its row lives for this process only, as a stream's does. A server that sends the body
    /// from its start again restarts the count (nothing was kept). ``Download/timings`` tells what it
    /// cost once it ended. Each request made here is a download of its own (a new ``id``), so one URL
    /// may be fetched many times at once; the same value enqueued twice is one download. It takes no
    /// checksum; ``takesFileNameFromServer`` and a ``destination`` set later are ignored.
    ///
    /// - Parameters:
    ///   - url: an http(s) URL.
    ///   - headers: sent with its requests, over the manager's.
    public static func discarding(_ url: URL, headers: [DownloadHeader] = []) -> DownloadRequest {
        var request = DownloadRequest(url: url, uniqueTo: nowhere, headers: headers)
        request.discardsBody = true
        return request
    }

    /// A discarded or collected body's destination, its path and URL made once.
    package static var nowhere: (path: String, url: URL) { RequestRules.nowhere }

    /// A request whose body is collected into `collector` (``DownloadManager/data(from:headers:maximumSize:)``).
    package static func collecting(_ url: URL, headers: [DownloadHeader], into collector: BodyCollector)
        -> DownloadRequest
    {
        var request = discarding(url, headers: headers)
        request.collector = collector
        return request
    }

    /// Gives the request an id of its own, random, kept whatever is set after: a download whose
    /// destination names no file it could be found again by (a discarded body, a stream's pipe,
    /// whose descriptor number the next stream may be given as soon as this one's is closed).
    package mutating func giveUniqueID() {
        let (id, token) = HaulValues.DownloadID.random()
        identity.value = Identity(id: id, destinationPath: identity.value.destinationPath)
        uniqueToken = token
    }

    /// A request with an id of its own (``giveUniqueID()``), made without deriving its destination's
    /// first (a SHA-256 for nothing, per body of ``DownloadManager/data(from:headers:maximumSize:)``).
    /// The destination's path is the one made with it (standardising `/dev/null` again was 1 % of
    /// `haul load`'s samples, a sixteenth of its caller's thread).
    private init(url: URL, uniqueTo destination: (path: String, url: URL), headers: [DownloadHeader]) {
        self.url = url
        self.destination = destination.url
        self.priority = 0
        self.headers = headers
        identity.value.destinationPath = destination.path
        giveUniqueID()
    }

    /// `url` when it is one Haul can download: `http` or `https`, a host, a port from 1 to 65535,
    /// and a URL curl's parser takes, the check ``DownloadManager/download(_:)`` makes; for a caller
    /// that reads URLs before it asks for them (a list, a load test's targets).
    ///
    /// - Throws: ``DownloadError`` with code `.invalidURL` or `.unsupportedScheme`, the URL shown
    ///   without its user name and password.
    public static func checkedURL(_ url: URL) throws(DownloadError) -> URL {
        do {
            return try RequestRules.checkedURL(url)
        } catch {
            throw DownloadError(error)
        }
    }

    /// The URL written in `string` (spaces around it ignored), as ``DownloadManager`` reads one:
    /// a string with white space or control characters inside is not a URL, where Foundation
    /// would percent-encode them.
    ///
    /// - Throws: ``DownloadError`` with code `.invalidURL`, naming `shownAs` (by default `string`).
    public static func url(parsing string: String, shownAs shown: String? = nil) throws(DownloadError) -> URL {
        let trimmed = string.trimmingWhitespace
        // By byte while the text is ASCII (a space, a control character or DEL refuses it); by
        // Unicode scalar only past the first byte that is not.
        let refused =
            trimmed.utf8.contains { $0 <= 0x20 || $0 == 0x7f || $0 >= 0x80 }
            && trimmed.unicodeScalars.contains(where: {
                $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7f
            })
        guard !refused, let url = URL(string: trimmed)
        else {
            throw DownloadError(code: .invalidURL, url: shown ?? string, detail: "it could not be parsed")
        }
        return url
    }

    /// The key this request counts under for per-host limits
    /// (``DownloadManager/Configuration/maxConcurrentDownloadsPerHost``): the URL's host in lower case and
    /// its port (`example.com:443`), the port being the scheme's when the URL names none.
    public var hostKey: String { url.hostKey }

    /// `url` as Haul shows it in errors, events, logs and the journal: without its user name and
    /// password.
    public static func redacted(_ url: URL) -> String { url.redactedString }

    /// The file name a download into a folder takes from its URL when the server names none
    /// (`Content-Disposition`): the URL's last path segment, percent-decoded and made safe (a `/` or
    /// `\\` it encoded, a control or bidirectional character become `_`, a leading dot gets a `_`
    /// before it, cut from the front to 255 bytes), or `index.html` when the path has none.
    public static func fileName(fromURL url: String) -> String { ServerFileName.fromURL(url) }

    /// The names tried when `name` is taken: `name` itself for 0, then `name.1`, `name.2`…, each
    /// shortened from the front to fit in 255 bytes.
    public static func fileName(_ name: String, numbered counter: Int) -> String {
        ServerFileName.numbered(name, counter)
    }
}
