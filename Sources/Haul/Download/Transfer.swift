import CHaul
import FoundationEssentials
import Glibc

/// The loop thread's side of one admitted download: its state machine, its partial file, its curl
/// request. Exists from admission until the download pauses or ends; a queued download is only a
/// journal row. Loop thread only; the public ``Download`` talks to it through commands.
final class Transfer {
    let download: Download
    let store: Journal
    unowned let scheduler: Scheduler
    var machine: DownloadStateMachine
    var record: DownloadRecord
    var sink: FileSink?
    var easy: EasyHandle?
    /// Revalidating a complete file: the request is conditional, and a 304 keeps the destination.
    var revalidating = false
    /// The server said the complete file did not change: keep the destination as it is.
    var notModified = false
    /// Paused by the user, rather than by a shutdown.
    var pausedByUser = false
    /// Whether this download counts against `maxConcurrentDownloads`.
    var holdsSlot = false
    /// The partial file's length when the current request was made.
    var requestedOffset: Int64 = 0
    /// The partial file's length when this attempt's first request was made: an attempt progressed
    /// only if it took the file past it (a restart from zero within the attempt does not count).
    var lengthAtAttemptStart: Int64?
    var headSeen = false
    /// Where the accepted response's body ends, when it is a range that stops before the end of the
    /// file (``ResponseDecision/rangeEnd(of:)``): reaching it asks for the next range.
    var rangeEnd: Int64?
    /// The response head of the current attempt, once ``headSeen``.
    var head: ResponseHead?
    /// A failure the write callback met (disk full…), reported when curl ends the transfer.
    var writeError: DownloadError?
    /// The record holds a response's validators and attempt that the journal lacks yet: they are
    /// written before the first bytes of that response reach the partial file (see
    /// `Scheduler.acceptBody`), or with the next row written for another reason.
    var rowBehind = false
    /// The current response's `Retry-After`, if it had one.
    var retryAfter: Duration?
    var speed = SpeedMeter()
    var lastProgressAt: UInt64 = 0

    init(
        download: Download,
        record: DownloadRecord,
        store: Journal,
        scheduler: Scheduler,
        restarts: Int,
        retryLimit: Int
    ) {
        scheduler.catalog.census.transfers.add(1, ordering: .relaxed)
        self.download = download
        self.store = store
        self.scheduler = scheduler
        self.machine = DownloadStateMachine(
            url: download.url.redactedString,
            failures: record.failures,
            restarts: restarts,
            retryLimit: retryLimit
        )
        self.record = record
    }

    deinit { scheduler.catalog.census.transfers.subtract(1, ordering: .relaxed) }

    var id: DownloadID { download.id }
    /// `host:port`, the key of per-host limits.
    var hostKey: String { record.host.isEmpty ? DownloadManager.hostKey(of: download.url) : record.host }
    var partialPath: String { store.partialPath(for: id) }
    var urlForErrors: String { machine.url }

    /// Bytes received so far, as progress.
    func progress(now: UInt64? = nil) -> DownloadProgress {
        let received = sink?.committedLength ?? Self.fileLength(partialPath) ?? 0
        return DownloadProgress(
            bytesReceived: received,
            totalBytes: record.totalBytes,
            bytesPerSecond: speed.bytesPerSecond,
            estimatedTimeRemaining: speed.estimatedTimeRemaining(received: received, total: record.totalBytes)
        )
    }

    /// The same error, attributed to this download's URL.
    func attributed(_ error: DownloadError) -> DownloadError {
        var error = error
        error.url = urlForErrors
        return error
    }

    /// Reads what the decision needs from the final response.
    func responseHead(of easy: EasyHandle) -> ResponseHead {
        ResponseHead(
            status: easy.responseCode,
            contentRange: easy.header("Content-Range"),
            contentLength: easy.contentLength,
            entityTag: easy.header("ETag"),
            lastModified: easy.header("Last-Modified"),
            conflictingContentLengths: easy.conflictingValues(of: "Content-Length")
        )
    }

    static func fileLength(_ path: String) -> Int64? {
        var status = stat()
        guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(status.st_size)
    }
}
