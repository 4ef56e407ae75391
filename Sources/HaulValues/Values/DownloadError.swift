import CHaul
import FoundationEssentials
import Glibc

/// Why a download failed, as the layers below report it: the public `DownloadError`'s fields (it
/// says what each code and field means), and what its description reads besides them.
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

        package static let invalidURL = Code(.invalidURL)
        package static let unsupportedScheme = Code(.unsupportedScheme)
        package static let httpStatus = Code(.httpStatus)
        package static let transport = Code(.transport)
        package static let fileSystem = Code(.fileSystem)
        package static let rangeNotHonored = Code(.rangeNotHonored)
        package static let sizeMismatch = Code(.sizeMismatch)
        package static let shutdown = Code(.shutdown)
        package static let journal = Code(.journal)
        package static let journalLocked = Code(.journalLocked)
        package static let cancelled = Code(.cancelled)
        package static let checksumMismatch = Code(.checksumMismatch)
        package static let fileTooLarge = Code(.fileTooLarge)
        package static let destinationInUse = Code(.destinationInUse)
        package static let internalError = Code(.internalError)
        package static let invalidHeader = Code(.invalidHeader)
        package static let headersUnavailable = Code(.headersUnavailable)
        package static let unexpectedAnswer = Code(.unexpectedAnswer)
        package static let unsupportedDestination = Code(.unsupportedDestination)
        package static let streamCannotRestart = Code(.streamCannotRestart)
        package static let unsafeFile = Code(.unsafeFile)
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
