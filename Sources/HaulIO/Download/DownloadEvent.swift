import FoundationEssentials
import HaulValues

/// What a download's ``Download/events`` sequence yields.
///
/// A new iteration starts with the download's current state, then follows every change. Progress is
/// coalesced: at most one `.progress` per ``DownloadManager/Configuration/progressInterval``, and a
/// consumer that falls behind sees the newest progress rather than a backlog. The final event
/// (`.completed`, `.failed` or `.cancelled`) is never dropped; the sequence ends after it, or after
/// `.paused` when the manager shuts down.
package enum DownloadEvent: Sendable, Hashable {
    /// Waiting for a free slot.
    case queued
    /// A request is out, for the bytes after `progress.bytesReceived`.
    case connecting(DownloadProgress)
    /// The server's answer was accepted; body bytes follow.
    case receiving(DownloadProgress)
    /// More bytes were written.
    case progress(DownloadProgress)
    /// The partial file was thrown away and the download starts again from zero, for this reason.
    case restarted(RestartReason)
    /// The attempt failed transiently (the error says how); the download waits to retry, and may
    /// start after this delay, from the bytes on disk (``DownloadState/waitingToRetry(_:after:)``).
    indirect case waitingToRetry(DownloadError, after: Duration)
    /// Something the caller may not expect; the download goes on.
    case warning(DownloadWarning)
    /// Requests go to this URL now (credentials removed), after this failure of the one before: the
    /// next of the download's mirrors (``DownloadRequest/mirrors``), or a fresh URL from the refresh
    /// hook (``DownloadManager/Configuration/urlRefresher``). The bytes on disk continue only if its
    /// answer proves the same file. ``Download/url`` says it too.
    indirect case switchedURL(URL, after: DownloadError)
    /// Paused; the partial file holds `progress.bytesReceived` bytes.
    case paused(DownloadProgress)
    /// Finished: the whole file is at this path.
    case completed(URL)
    /// Failed with this error.
    indirect case failed(DownloadError)
    /// Cancelled; the partial file was deleted.
    case cancelled

    /// Whether this is the last event of a download.
    package var isFinal: Bool {
        switch self {
        case .completed, .failed, .cancelled: true
        default: false
        }
    }
}
