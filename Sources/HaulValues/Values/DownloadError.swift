import CHaul
import FoundationEssentials
import Glibc

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
package struct DownloadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure. Compare with the static members, e.g. `error.code == .httpStatus`.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Base: String, Hashable, Sendable {
            case invalidURL
            case unsupportedScheme
            case httpStatus
            case transport
            case fileSystem
            case rangeNotHonored
            case sizeMismatch
            case shutdown
            case cancelled
            case journal
            case journalLocked
            case checksumMismatch
            case fileTooLarge
            case destinationInUse
            case internalError
            case invalidHeader
            case headersUnavailable
            case unexpectedAnswer
            case unsupportedDestination
            case streamCannotRestart
            case unsafeFile
            case untrustedDestination
        }
        let base: Base
        fileprivate init(_ base: Base) { self.base = base }

        /// The URL could not be parsed or has no host.
        package static let invalidURL = Code(.invalidURL)
        /// The URL's scheme is not `http` or `https`.
        package static let unsupportedScheme = Code(.unsupportedScheme)
        /// The server answered with an HTTP status that is not a success (see ``DownloadError/httpStatus``).
        package static let httpStatus = Code(.httpStatus)
        /// The connection failed: name resolution, connect, TLS, reset, timeout (see ``DownloadError/curlCode``).
        package static let transport = Code(.transport)
        /// Reading or writing a local file failed (see ``DownloadError/errno`` and ``DownloadError/path``).
        package static let fileSystem = Code(.fileSystem)
        /// The server kept answering a range request with a range other than the one asked for.
        package static let rangeNotHonored = Code(.rangeNotHonored)
        /// The body ended before the length the server announced.
        package static let sizeMismatch = Code(.sizeMismatch)
        /// The manager shut down before the download finished; its partial file is kept for a later resume.
        package static let shutdown = Code(.shutdown)
        /// The state directory's journal cannot be used (not a Haul journal, damaged, or from a newer
        /// Haul); see ``DownloadError/path`` and ``DownloadError/detail``. No user file was touched.
        package static let journal = Code(.journal)
        /// Another process (or another manager) is using the same state directory.
        package static let journalLocked = Code(.journalLocked)
        /// The download was cancelled (`Download.cancel()`, awaited or not); its partial file was deleted.
        package static let cancelled = Code(.cancelled)
        /// The whole file's checksum or length is not the expected one (see ``DownloadError/detail``,
        /// which gives both values). Nothing was placed at the destination; the partial was deleted.
        package static let checksumMismatch = Code(.checksumMismatch)
        /// The file is larger than the configured maximum
        /// (``DownloadManager/Configuration/maximumFileSize``, or for a body in memory the
        /// `maximumSize` of ``DownloadManager/data(from:headers:maximumSize:)``).
        package static let fileTooLarge = Code(.fileTooLarge)
        /// No longer produced: a download's id is its destination's, so a second URL for a destination
        /// being written is the same download (its next request goes to the new URL), not a rival.
        package static let destinationInUse = Code(.destinationInUse)
        /// A resource of the process (threads, file descriptors, libcurl handles) could not be had.
        package static let internalError = Code(.internalError)
        /// A request header cannot be sent: its name is not a token, its value holds a line break,
        /// or it is one Haul sets itself (`Range`, `If-Range`, `Accept-Encoding`…). Nothing was queued.
        package static let invalidHeader = Code(.invalidHeader)
        /// A download restored from the journal was queued with headers whose values are not stored
        /// (see ``DownloadHeader``), and no ``DownloadManager/Configuration/headerProvider`` gave them
        /// back: it was not sent without them. Its partial file is kept.
        package static let headersUnavailable = Code(.headersUnavailable)
        /// The server's answer did not prove it is the file: it lacked the validator (ETag,
        /// Last-Modified) the download's bytes are pinned to, or a new version came without a
        /// validator and a length. Typically an overloaded server's or load balancer's error page sent
        /// as `200 OK`. Transient: retried; nothing on disk was replaced.
        package static let unexpectedAnswer = Code(.unexpectedAnswer)
        /// The destination cannot take this download, and nothing there was changed: a block device
        /// (never written), a stream asked for with a checksum (which is checked on a whole file
        /// before it is placed), or a device, FIFO, socket or folder found where a finished file was
        /// to be placed (never replaced by one).
        package static let unsupportedDestination = Code(.unsupportedDestination)
        /// The download writes to a stream (a device, a FIFO, standard output) and would have to
        /// start over (the remote file changed, or the server ignored the range): bytes already
        /// written to a stream cannot be taken back, so it fails; nothing was spliced.
        package static let streamCannotRestart = Code(.streamCannotRestart)
        /// What is where Haul keeps its state (the state directory, a partial file, the journal) is
        /// not what Haul made there: a symbolic link, a FIFO, a device, another user's file or folder,
        /// a file with a second name. Haul left it as it is and wrote nothing through it.
        package static let unsafeFile = Code(.unsafeFile)
        /// The destination is reached through a symbolic link, or is a FIFO, that another user put
        /// in a shared folder (sticky and writable by all, as `/tmp`): Haul does not follow it, as
        /// the kernel does not with `fs.protected_symlinks` and `fs.protected_fifos` on, and wrote
        /// nothing (see ``DownloadError/path`` and ``DownloadError/detail``).
        package static let untrustedDestination = Code(.untrustedDestination)

        /// The code's name, e.g. `httpStatus`.
        package var description: String { base.rawValue }
    }

    /// The kind of failure.
    package var code: Code
    /// The URL that failed, with any user name and password removed. `nil` for failures of the manager itself.
    package var url: String?
    /// The HTTP status the server answered with, when there was one.
    package var httpStatus: Int?
    /// The libcurl result code (`CURLcode`), for transport failures.
    package var curlCode: Int?
    /// The `errno` of a failed system call, for file-system failures.
    package var errno: Int32?
    /// The local path involved, for file-system failures.
    package var path: String?
    /// What libcurl or the system said, in its words.
    package var detail: String?
    /// A file-system failure that leaves no partial file (a download that fits in its buffer could
    /// not be written as a whole file; a partial file was deleted by someone else): the description
    /// does not say one is kept.
    package var nothingKept = false
    /// A stream failed for want of a validator: the description names `resumesWithoutValidator`.
    package var suggestsUnvalidatedResume = false
    /// A write through a stream failed (a pipe, a FIFO, a device): nothing there can be resumed, and
    /// the description says to download again rather than to resume.
    package var wroteThrough = false
    /// The write that failed went to a character device (`/dev/full`, a tape at its end): no space
    /// is freed there by waiting, so out-of-space is not retried.
    package var wroteToDevice = false
    /// The download decodes bodies (`decodesCompression`), so each attempt asked for the body from
    /// its start: one cut short at every attempt gets no further, and the description says why.
    package var decodedFromStart = false
    /// A body in memory went past the `maximumSize` given to
    /// ``DownloadManager/data(from:headers:maximumSize:)`` (not the manager's `maximumFileSize`):
    /// the description names that argument.
    package var exceededMaximumSizeArgument = false
    /// Where a transport failure happened, as Haul knew it then from curl's codes and its own state
    /// (never from a message's words): what ``category`` and the advice read.
    package var stage: TransportStage?

    /// Creates an error. Prefer matching the errors Haul throws over creating your own.
    package init(
        code: Code,
        url: String?,
        httpStatus: Int? = nil,
        curlCode: Int? = nil,
        errno: Int32? = nil,
        path: String? = nil,
        detail: String? = nil
    ) {
        self.code = code
        self.url = url
        self.httpStatus = httpStatus
        self.curlCode = curlCode
        self.errno = errno
        self.path = path
        self.detail = detail
    }

    /// A sentence naming what failed, why, and what the user can do; the settings its advice names
    /// are ``DownloadManager/Configuration``'s and ``DownloadRequest``'s (see ``description(naming:)``).
    package var description: String { description(naming: \.libraryName) }

    /// What went wrong, in a few words and without advice: for events after which Haul goes on by
    /// itself (a retry), where ``description``'s "resume the download" would mislead.
    package var cause: String {
        switch code.base {
        case .httpStatus:
            return "the server answered HTTP \(httpStatus.map(String.init) ?? "an error status")"
                + Self.reason(forStatus: httpStatus)
        case .transport:
            let cause =
                detail ?? curlCode.map { String(cString: curl_easy_strerror(CURLcode(UInt32($0)))) } ?? "unknown"
            return "\(cause)\(curlCode.map { " (curl error \($0))" } ?? "")"
        case .sizeMismatch:
            return detail ?? "the body was shorter than the server announced"
        case .fileSystem:
            let cause = errno.map { String(cString: strerror($0)) } ?? detail ?? "an I/O error"
            return "writing \(path.map { "'\($0)'" } ?? "a local file") failed: \(cause)"
        default:
            return detail ?? code.description
        }
    }

    /// Whether trying again later may succeed: connection failures, timeouts, bodies cut short, the
    /// HTTP statuses that say "not now" (408, 425, 429, and 5xx other than 501 and 505), a file
    /// that could not be opened because the process or the system had no file descriptor left
    /// (`EMFILE`, `ENFILE`: other transfers free theirs), and a disk or quota that is full (`ENOSPC`,
    /// `EDQUOT`: space may be freed; the bytes written are kept; not a character device's). Haul retries these itself (see
    /// ``DownloadManager/Configuration/retryLimit``); other failures are permanent for the request as made.
    package var isTransient: Bool {
        switch code.base {
        case .sizeMismatch, .unexpectedAnswer:
            return true
        case .fileSystem:
            return isOutOfDescriptors || isOutOfSpace && !wroteToDevice
        case .httpStatus:
            guard let httpStatus else { return false }
            return [408, 425, 429].contains(httpStatus)
                || (500...599).contains(httpStatus) && ![501, 505].contains(httpStatus)
        case .transport:
            guard let curlCode else { return false }
            // couldn't connect, partial file, timeout, SSL connect, got nothing, send, recv, HTTP/2
            // framing and stream errors.
            return [7, 16, 18, 28, 35, 52, 55, 56, 92].contains(curlCode)
        default:
            return false
        }
    }

    /// Whether another URL of the same file (a mirror) may not fail so: an HTTP status, the network,
    /// a body cut short, ranges the server gets wrong. Failures on this side (the disk, the journal,
    /// a checksum, a size limit) would follow the download anywhere.
    package var movesToAnotherURL: Bool {
        switch code.base {
        case .httpStatus, .sizeMismatch, .rangeNotHonored, .unexpectedAnswer: return true
        case .transport:
            // Not: a write the callback refused (23), a transfer it aborted (42), memory (27).
            return ![23, 27, 42].contains(curlCode ?? 0)
        default: return false
        }
    }

    /// A file-system failure for want of a file descriptor.
    var isOutOfDescriptors: Bool {
        code == .fileSystem && (errno == EMFILE || errno == ENFILE)
    }

    /// A file-system failure for want of space: the disk or the user's quota is full.
    package var isOutOfSpace: Bool {
        code == .fileSystem && (errno == ENOSPC || errno == EDQUOT)
    }
}
