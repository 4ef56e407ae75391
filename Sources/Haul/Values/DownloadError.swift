import FoundationEssentials
import HaulValues

/// Why a download failed: a code you can match on, the URL (with any credentials removed), and the
/// underlying cause: an HTTP status, a libcurl code, or an `errno` with the file's path.
///
/// ```swift
/// do {
///     let file = try await download.finished()
/// } catch let error as DownloadError where error.code == .httpStatus {
///     print("the server answered \(error.httpStatus!)")
/// }
/// ```
///
/// Its `description` is a sentence that says what failed and what to do about it.
public struct DownloadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure. Compare with the static members, e.g. `error.code == .httpStatus`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code as the layers below give it.
        package let engine: HaulValues.DownloadError.Code
        package init(_ engine: HaulValues.DownloadError.Code) { self.engine = engine }

        /// The URL could not be parsed or has no host.
        public static let invalidURL = Code(.invalidURL)
        /// The URL's scheme is not `http` or `https`.
        public static let unsupportedScheme = Code(.unsupportedScheme)
        /// The server answered with an HTTP status that is not a success (see ``DownloadError/httpStatus``).
        public static let httpStatus = Code(.httpStatus)
        /// The connection failed: name resolution, connect, TLS, reset, timeout (see ``DownloadError/curlCode``).
        public static let transport = Code(.transport)
        /// Reading or writing a local file failed (see ``DownloadError/errno`` and ``DownloadError/path``).
        public static let fileSystem = Code(.fileSystem)
        /// The server kept answering a range request with a range other than the one asked for.
        public static let rangeNotHonored = Code(.rangeNotHonored)
        /// The body ended before the length the server announced.
        public static let sizeMismatch = Code(.sizeMismatch)
        /// The manager shut down before the download finished; its partial file is kept for a later resume.
        public static let shutdown = Code(.shutdown)
        /// The state directory's journal cannot be used (not a Haul journal, damaged, or from a newer
        /// Haul); see ``DownloadError/path`` and ``DownloadError/detail``. No user file was touched.
        public static let journal = Code(.journal)
        /// Another process (or another manager) is using the same state directory.
        public static let journalLocked = Code(.journalLocked)
        /// The download was cancelled (`Download.cancel()`, awaited or not); its partial file was deleted.
        public static let cancelled = Code(.cancelled)
        /// The whole file's checksum or length is not the expected one (see ``DownloadError/detail``,
        /// which gives both values). Nothing was placed at the destination; the partial was deleted.
        public static let checksumMismatch = Code(.checksumMismatch)
        /// The file is larger than the configured maximum
        /// (``DownloadManager/Configuration/maximumFileSize``, or for a body in memory the
        /// `maximumSize` of ``DownloadManager/data(from:headers:maximumSize:)``).
        public static let fileTooLarge = Code(.fileTooLarge)
        /// A request asked for a checksum or size other than the download of its destination has:
        /// while that download's file was being placed (its checks made), or while another caller
        /// holds its handle, waiting for a file with the checks it asked for. Nothing was changed;
        /// ask again once it ended: the file is then checked against the request's, and fetched
        /// anew if it differs. (A destination has one download: asking for it from another URL,
        /// or with a checksum when none holds it, updates it.)
        public static let destinationInUse = Code(.destinationInUse)
        /// A resource of the process (threads, file descriptors, libcurl handles) could not be had.
        public static let internalError = Code(.internalError)
        /// A request header cannot be sent: its name is not a token, its value holds a line break,
        /// or it is one Haul sets itself (`Range`, `If-Range`, `Accept-Encoding`…). Nothing was queued.
        public static let invalidHeader = Code(.invalidHeader)
        /// A download restored from the journal was queued with headers whose values are not stored
        /// (see ``DownloadHeader``), and no ``DownloadManager/Configuration/headerProvider`` gave them
        /// back: it was not sent without them. Its partial file is kept.
        public static let headersUnavailable = Code(.headersUnavailable)
        /// The server's answer did not prove it is the file: it lacked the validator (ETag,
        /// Last-Modified) the download's bytes are pinned to, or a new version came without a
        /// validator and a length. Typically an overloaded server's or load balancer's error page sent
        /// as `200 OK`. Transient: retried; nothing on disk was replaced.
        public static let unexpectedAnswer = Code(.unexpectedAnswer)
        /// The destination cannot take this download, and nothing there was changed: a block device
        /// (never written), a stream asked for with a checksum (which is checked on a whole file
        /// before it is placed), or a device, FIFO, socket or folder found where a finished file was
        /// to be placed (never replaced by one).
        public static let unsupportedDestination = Code(.unsupportedDestination)
        /// The download writes to a stream (a device, a FIFO, standard output) and would have to
        /// start over (the remote file changed, or the server ignored the range): bytes already
        /// written to a stream cannot be taken back, so it fails; nothing was spliced.
        public static let streamCannotRestart = Code(.streamCannotRestart)
        /// What is where Haul keeps its state (the state directory, a partial file, the journal) is
        /// not what Haul made there: a symbolic link, a FIFO, a device, another user's file or folder,
        /// a file with a second name. Haul left it as it is and wrote nothing through it.
        public static let unsafeFile = Code(.unsafeFile)
        /// The destination is reached through a symbolic link, or is a FIFO, that another user put
        /// in a shared folder (sticky and writable by all, as `/tmp`): Haul does not follow it, as
        /// the kernel does not with `fs.protected_symlinks` and `fs.protected_fifos` on, and wrote
        /// nothing (see ``DownloadError/path`` and ``DownloadError/detail``).
        public static let untrustedDestination = Code(.untrustedDestination)

        /// The code's name, e.g. `httpStatus`.
        public var description: String { engine.description }
    }

    /// The failure as the layers below report it, with what its description reads besides the
    /// public fields (whether a partial file is kept, where a transport failure happened…).
    package var engine: HaulValues.DownloadError

    /// The failure the layers below reported.
    package init(_ engine: HaulValues.DownloadError) { self.engine = engine }

    /// The kind of failure.
    public var code: Code {
        get { Code(engine.code) }
        set { engine.code = newValue.engine }
    }
    /// The URL that failed, with any user name and password removed. `nil` for failures of the manager itself.
    public var url: String? {
        get { engine.url }
        set { engine.url = newValue }
    }
    /// The HTTP status the server answered with, when there was one.
    public var httpStatus: Int? {
        get { engine.httpStatus }
        set { engine.httpStatus = newValue }
    }
    /// The libcurl result code (`CURLcode`), for transport failures.
    public var curlCode: Int? {
        get { engine.curlCode }
        set { engine.curlCode = newValue }
    }
    /// The `errno` of a failed system call, for file-system failures.
    public var errno: Int32? {
        get { engine.errno }
        set { engine.errno = newValue }
    }
    /// The local path involved, for file-system failures.
    public var path: String? {
        get { engine.path }
        set { engine.path = newValue }
    }
    /// What libcurl or the system said, in its words.
    public var detail: String? {
        get { engine.detail }
        set { engine.detail = newValue }
    }

    /// Creates an error. Prefer matching the errors Haul throws over creating your own.
    public init(
        code: Code,
        url: String?,
        httpStatus: Int? = nil,
        curlCode: Int? = nil,
        errno: Int32? = nil,
        path: String? = nil,
        detail: String? = nil
    ) {
        self.init(
            HaulValues.DownloadError(
                code: code.engine,
                url: url,
                httpStatus: httpStatus,
                curlCode: curlCode,
                errno: errno,
                path: path,
                detail: detail
            )
        )
    }

    /// The code's name, e.g. `httpStatus`.
    public var description: String { engine.description }

    /// What went wrong, in a few words and without advice: for events after which Haul goes on by
    /// itself (a retry), where ``description``'s "resume the download" would mislead.
    public var cause: String { engine.cause }

    /// Whether trying again later may succeed: connection failures, timeouts, bodies cut short, the
    /// HTTP statuses that say "not now" (408, 425, 429, and 5xx other than 501 and 505), a file
    /// that could not be opened because the process or the system had no file descriptor left
    /// (`EMFILE`, `ENFILE`: other transfers free theirs), and a disk or quota that is full (`ENOSPC`,
    /// `EDQUOT`: space may be freed; the bytes written are kept; not a character device's). Haul retries these itself (see
    /// ``DownloadManager/Configuration/retryLimit``); other failures are permanent for the request as made.
    public var isTransient: Bool { engine.isTransient }

    /// Whether another URL of the same file (a mirror) may not fail so: an HTTP status, the network,
    /// a body cut short, ranges the server gets wrong. Failures on this side (the disk, the journal,
    /// a checksum, a size limit) would follow the download anywhere.
    public var movesToAnotherURL: Bool { engine.movesToAnotherURL }
}

extension DownloadError {
    /// A setting that the advice of an error's ``DownloadError/description`` names: a property of
    /// ``DownloadManager/Configuration`` or of ``DownloadRequest``. A program built on Haul names each
    /// in its own words with ``DownloadError/description(naming:)`` (`haul` gives its options:
    /// `--ca-file` for ``certificateAuthorityFile``).
    public enum Setting: String, Sendable, Hashable, CaseIterable {
        case proxy
        case connectTimeout
        case stallTimeout
        case maximumRedirects
        case certificateAuthorityFile
        case decodesCompression
        case maxConcurrentDownloads
        case stateDirectory
        case maximumFileSize
        case resumesWithoutValidator
        /// ``DownloadRequest/continuesExistingFile``.
        case continuesExistingFile
        /// A request's headers: ``DownloadRequest/headers``, or ``DownloadManager/Configuration/headerProvider``.
        case headers

        /// The setting as the library's ``DownloadError/description`` names it: `Configuration.stallTimeout`.
        public var libraryName: String { engine.libraryName }

        /// The setting as the layers below name it.
        var engine: HaulValues.DownloadError.Setting { HaulValues.DownloadError.Setting(rawValue: rawValue)! }
    }

    /// ``description`` with the settings its advice names in the caller's words, `name` giving
    /// each one's (a command-line tool's options, say); ``description`` is this with
    /// ``Setting/libraryName``.
    public func description(naming name: (Setting) -> String) -> String {
        engine.description { name(Setting(rawValue: $0.rawValue)!) }  // the same names, case for case
    }

    /// What kind of failure it is, in the classes a script acts on differently: `haul` exits with a
    /// status of its own for each (see `haul --help`).
    public enum Category: Sendable, Hashable, CaseIterable {
        /// The request itself cannot be made: an invalid URL, an unsupported scheme, a bad header, a
        /// destination that cannot take it (a block device), header values that are not available.
        case invalidRequest
        /// The server answered with an HTTP error status (after any retries).
        case httpStatus
        /// A host name (the server's, or the proxy's) could not be resolved.
        case nameResolution
        /// No connection: refused, the host or network unreachable, or connecting timed out.
        case connection
        /// The TLS handshake or the certificate's verification failed.
        case tls
        /// The file failed a check: its checksum, its expected size, the maximum size.
        case verification
        /// Local files: the disk is full or unwritable, the state directory or journal cannot be used.
        case localFiles
        /// The transfer failed midway: a dropped or stalled connection, or a server that misbehaves
        /// (ranges, lengths, error pages, redirects).
        case transfer
        /// The download was cancelled or its manager shut down.
        case stopped
        /// Anything else (an internal failure, a destination another download is writing).
        case other

        /// The class's name, as in Swift (`httpStatus`, `connection`…): what a queue stores.
        public var name: String { "\(self)" }

        /// The class named `name` (``name``), or `nil`.
        public init?(name: String) {
            guard let found = Self.allCases.first(where: { $0.name == name }) else { return nil }
            self = found
        }

        /// The class as the layers below give it.
        init(_ category: HaulValues.DownloadError.Category) {
            switch category {
            case .invalidRequest: self = .invalidRequest
            case .httpStatus: self = .httpStatus
            case .nameResolution: self = .nameResolution
            case .connection: self = .connection
            case .tls: self = .tls
            case .verification: self = .verification
            case .localFiles: self = .localFiles
            case .transfer: self = .transfer
            case .stopped: self = .stopped
            case .other: self = .other
            }
        }
    }

    /// The class of this failure (see ``Category``).
    public var category: Category { Category(engine.category) }
}

/// Runs `body`: an error the layers below threw comes out as the public ``DownloadError`` it is, so
/// that a caller's `catch let error as DownloadError` matches every failure Haul throws.
func withPublicErrors<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as HaulValues.DownloadError {
        throw DownloadError(error)
    }
}

/// ``withPublicErrors(_:)`` of an asynchronous body.
func withPublicErrors<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as HaulValues.DownloadError {
        throw DownloadError(error)
    }
}
