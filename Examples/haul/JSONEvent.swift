import FoundationEssentials
import Haul

/// `haul --json`: one JSON object per line, keys sorted, one type per event, every one carrying the
/// schema version. The schema is documented in `docs/json.md`; a change that removes or renames a
/// field bumps ``schema``. A field has the name of the library's property it comes from
/// (`bytesReceived`, `timeToFirstByte`), durations in seconds, and one type wherever it appears.
enum JSONEvent {
    /// The version of the objects below.
    static let schema = 3

    /// `queued`, or `cancelled`: the event alone.
    struct Plain: Encodable {
        var schema = JSONEvent.schema
        let event: String
        let url: String
        let path: String
    }

    /// `connecting`, `receiving`, `progress`, `paused`: where the download stands.
    struct Progress: Encodable {
        var schema = JSONEvent.schema
        let event: String
        let url: String
        let path: String
        /// Bytes in the partial file (from this run and earlier ones).
        let bytesReceived: Int64
        /// The file's length, when known.
        let totalBytes: Int64?
        let bytesPerSecond: Int64
        /// Seconds, when known.
        let estimatedTimeRemaining: Double?
        /// Connections fetching the file now (more than 1 with `-x` on a file split into segments).
        let connections: Int
    }

    /// `restarted`: the partial file was thrown away and the download started from byte 0.
    struct Restarted: Encodable {
        var schema = JSONEvent.schema
        var event = "restarted"
        let url: String
        let path: String
        /// A sentence.
        let reason: String
        /// `rangeIgnored`, `remoteChanged`, `rangeMismatch`, `rangeNotSatisfiable`, `noValidator`,
        /// `overlapMismatch` or `decodedBody`.
        let reasonCode: String
    }

    /// `warning`: something the user may not expect; the download goes on.
    struct Warning: Encodable {
        var schema = JSONEvent.schema
        var event = "warning"
        let url: String
        let path: String
        /// A sentence.
        let warning: String
        /// `unrequestedContentEncoding`, `urlDropped`, `versionsDiffer`, `insecureRedirect` or
        /// `repeatedBytesReadPast`.
        var code: String
        /// The body's Content-Encoding, for `unrequestedContentEncoding`.
        var encoding: String? = nil
        /// The URL not used, for `urlDropped`.
        var droppedURL: String? = nil
        /// The plain-HTTP URL an https download was redirected to, for `insecureRedirect`.
        var redirectedTo: String? = nil
        /// The bytes read past, for `repeatedBytesReadPast`.
        var bytes: Int64? = nil
        /// Why the server sent the file from its start (a restart reason's code), for
        /// `repeatedBytesReadPast`.
        var reasonCode: String? = nil
    }

    /// `switched`: requests go to another URL of the file now (a mirror, a fresh URL).
    struct Switched: Encodable {
        var schema = JSONEvent.schema
        var event = "switched"
        let url: String
        let path: String
        /// The URL requests go to now, without credentials.
        let to: String
        /// What failed at the URL before, in a few words, and its code.
        let error: String
        let code: String
        let httpStatus: Int?
    }

    /// `waitingToRetry`: a transient failure; Haul tries again after `delay` seconds, keeping the bytes.
    struct WaitingToRetry: Encodable {
        var schema = JSONEvent.schema
        var event = "waitingToRetry"
        let url: String
        let path: String
        /// What went wrong, without advice (``DownloadError/cause``).
        let error: String
        let code: String
        let httpStatus: Int?
        let delay: Double
    }

    /// `completed`: the file is whole at `path`.
    struct Completed: Encodable {
        var schema = JSONEvent.schema
        var event = "completed"
        let url: String
        let path: String
        /// The file's length.
        let size: Int64
        /// Body bytes this run received for it (0 when it was complete already).
        let received: Int64
        /// The file was complete at `path` before this run; nothing was requested
        /// (``Download/wasAlreadyComplete``; the summary's `alreadyComplete` counts them).
        let wasAlreadyComplete: Bool
        /// The URL that answered, after redirects, when this run received the file.
        let finalURL: String?
        /// The response's `Content-Type`, if sent.
        let contentType: String?
        /// What it cost this run (absent for a file complete already).
        let timings: Timings?
    }

    /// A download's ``DownloadTimings``, in seconds.
    struct Timings: Encodable {
        /// From being admitted to its first request.
        let queued: Double?
        /// From its first request to the first byte of the body it accepted.
        let timeToFirstByte: Double?
        /// From its first request to its end.
        let total: Double?
        /// Requests made (resumes and retries included, redirects not).
        let attempts: Int
        /// Connections opened, and requests that went over one already open.
        let connectionsOpened: Int
        let connectionsReused: Int

        /// `nil` for a download that made no request.
        init?(_ timings: DownloadTimings?) {
            guard let timings, timings.attempts > 0 else { return nil }
            queued = timings.queued.map(Reporter.seconds)
            timeToFirstByte = timings.timeToFirstByte.map(Reporter.seconds)
            total = timings.total.map(Reporter.seconds)
            attempts = timings.attempts
            connectionsOpened = timings.connectionsOpened
            connectionsReused = timings.connectionsReused
        }
    }

    /// `failed`: the download ended without the file.
    struct Failed: Encodable {
        var schema = JSONEvent.schema
        var event = "failed"
        let url: String
        let path: String
        /// A sentence: what failed, why, and what to do.
        let error: String
        let code: String
        let httpStatus: Int?
        /// What it cost this run, when it made a request.
        let timings: Timings?
    }

    /// `summary`: the last line of a run.
    struct Summary: Encodable {
        var schema = JSONEvent.schema
        var event = "summary"
        /// Files this run completed, and files found complete already (not in `completed`).
        let completed: Int
        let alreadyComplete: Int
        let failed: Int
        /// Body bytes this run received.
        let received: Int64
        let seconds: Double
        /// The run was stopped by a signal or `--max-time`; running it again resumes.
        let interrupted: Bool
        /// `-m/--max-time` stopped it (absent otherwise).
        var timeLimitReached: Bool? = nil
    }

    /// One line of `haul --list --json`.
    struct ListEntry: Encodable {
        var schema = JSONEvent.schema
        let id: String
        let url: String
        let path: String
        /// `queued`, `retrying`, `running`, `paused`, `interrupted`, `completed` or `failed`.
        let state: String
        let bytesReceived: Int64
        let totalBytes: Int64?
        let lastError: String?
    }

    /// `haul --verify --json`: one completed download's file, hashed again.
    struct Verified: Encodable {
        var schema = JSONEvent.schema
        let id: String
        let url: String
        let path: String
        /// `matches`, `differs`, `missing` or `notRecorded` (no checksum was asked for).
        var result: String
        /// Whether nothing is wrong as far as can be known (`FileVerification.isIntact`).
        let intact: Bool
        /// The recorded checksum (`sha256:HEX`); the file's digest when it differs; why it is missing.
        var expected: String? = nil
        var actual: String? = nil
        var detail: String? = nil
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// `value` as one line of JSON (with its line break).
    static func line(_ value: some Encodable) -> String {
        guard let data = try? encoder.encode(value) else { return "" }
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    /// The object for `event` of the download of `url` to `path` (absolute).
    static func line(for event: DownloadEvent, url: String, path: String, download: Download?) -> String {
        func progress(_ name: String, _ progress: DownloadProgress) -> String {
            line(
                Progress(
                    event: name,
                    url: url,
                    path: path,
                    bytesReceived: progress.bytesReceived,
                    totalBytes: progress.totalBytes,
                    bytesPerSecond: Int64(progress.bytesPerSecond),
                    estimatedTimeRemaining: progress.estimatedTimeRemaining.map(Reporter.seconds),
                    connections: progress.connections
                )
            )
        }
        switch event {
        case .queued: return line(Plain(event: "queued", url: url, path: path))
        case .cancelled: return line(Plain(event: "cancelled", url: url, path: path))
        case .connecting(let value): return progress("connecting", value)
        case .receiving(let value): return progress("receiving", value)
        case .progress(let value): return progress("progress", value)
        case .paused(let value): return progress("paused", value)
        case .restarted(let reason):
            return line(Restarted(url: url, path: path, reason: reason.description, reasonCode: code(of: reason)))
        case .warning(let warning):
            // One object, its code and the field that goes with it by the kind of warning.
            var object = Warning(url: url, path: path, warning: Reporter.explain(warning), code: "")
            switch warning {
            case .unrequestedContentEncoding(let encoding):
                (object.code, object.encoding) = ("unrequestedContentEncoding", encoding)
            case .urlDropped(let dropped, _):
                (object.code, object.droppedURL) = ("urlDropped", dropped.absoluteString)
            case .versionsDiffer:
                object.code = "versionsDiffer"
            case .insecureRedirect(let target):
                (object.code, object.redirectedTo) = ("insecureRedirect", target.absoluteString)
            case .repeatedBytesReadPast(let bytes, let reason):
                (object.code, object.bytes, object.reasonCode) = ("repeatedBytesReadPast", bytes, code(of: reason))
            }
            return line(object)
        case .switchedURL(let next, let error):
            return line(
                Switched(
                    url: url,
                    path: path,
                    to: next.absoluteString,
                    error: error.cause,
                    code: error.code.description,
                    httpStatus: error.httpStatus
                )
            )
        case .waitingToRetry(let error, let delay):
            return line(
                WaitingToRetry(
                    url: url,
                    path: path,
                    error: error.cause,
                    code: error.code.description,
                    httpStatus: error.httpStatus,
                    delay: Reporter.seconds(delay)
                )
            )
        case .completed(let file):
            return line(
                Completed(
                    url: url,
                    path: file.path,
                    size: Reporter.completedSize(download?.progress, file: file),
                    received: download?.bytesReceivedInThisProcess ?? 0,
                    wasAlreadyComplete: download?.wasAlreadyComplete ?? false,
                    finalURL: download?.response?.url.absoluteString,
                    contentType: download?.response?.contentType,
                    timings: Timings(download?.timings)
                )
            )
        case .failed(let error):
            return line(
                Failed(
                    url: url,
                    path: path,
                    error: error.forCommandLine,
                    code: error.code.description,
                    httpStatus: error.httpStatus,
                    timings: Timings(download?.timings)
                )
            )
        }
    }

    /// A stable name for a restart's reason.
    static func code(of reason: RestartReason) -> String {
        switch reason {
        case .rangeIgnored: "rangeIgnored"
        case .remoteChanged: "remoteChanged"
        case .rangeMismatch: "rangeMismatch"
        case .rangeNotSatisfiable: "rangeNotSatisfiable"
        case .noValidator: "noValidator"
        case .overlapMismatch: "overlapMismatch"
        case .decodedBody: "decodedBody"
        }
    }
}
