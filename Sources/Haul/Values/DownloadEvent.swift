import FoundationEssentials
import HaulIO
import HaulValues

/// What a download's ``Download/events`` sequence yields.
///
/// A new iteration starts with the download's current state, then follows every change. Progress is
/// coalesced: at most one `.progress` per ``DownloadManager/Configuration/progressInterval``, and a
/// consumer that falls behind sees the newest progress rather than a backlog. The final event
/// (`.completed`, `.failed` or `.cancelled`) is never dropped; the sequence ends after it, or after
/// `.paused` when the manager shuts down.
public enum DownloadEvent: Sendable, Hashable {
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
    public var isFinal: Bool {
        switch self {
        case .completed, .failed, .cancelled: true
        default: false
        }
    }
}

extension DownloadEvent: CustomStringConvertible {
    /// The event's name and what it carries: "progress: 4.0 MiB of 32.0 MiB, 12.0 MiB/s, 3 s left",
    /// "restarted: the remote file changed", "completed: /data/big.iso"…
    public var description: String { engine.description }
}

extension DownloadEvent {
    /// The event as the layers below publish it.
    init(_ event: HaulIO.DownloadEvent) {
        switch event {
        case .queued: self = .queued
        case .connecting(let progress): self = .connecting(DownloadProgress(progress))
        case .receiving(let progress): self = .receiving(DownloadProgress(progress))
        case .progress(let progress): self = .progress(DownloadProgress(progress))
        case .restarted(let reason): self = .restarted(RestartReason(reason))
        case .waitingToRetry(let error, let delay): self = .waitingToRetry(DownloadError(error), after: delay)
        case .warning(let warning): self = .warning(DownloadWarning(warning))
        case .switchedURL(let url, let error): self = .switchedURL(url, after: DownloadError(error))
        case .paused(let progress): self = .paused(DownloadProgress(progress))
        case .completed(let file): self = .completed(file)
        case .failed(let error): self = .failed(DownloadError(error))
        case .cancelled: self = .cancelled
        }
    }

    /// The event as the layers below know it.
    var engine: HaulIO.DownloadEvent {
        switch self {
        case .queued: .queued
        case .connecting(let progress): .connecting(progress.engine)
        case .receiving(let progress): .receiving(progress.engine)
        case .progress(let progress): .progress(progress.engine)
        case .restarted(let reason): .restarted(reason.engine)
        case .waitingToRetry(let error, let delay): .waitingToRetry(error.engine, after: delay)
        case .warning(let warning): .warning(warning.engine)
        case .switchedURL(let url, let error): .switchedURL(url, after: error.engine)
        case .paused(let progress): .paused(progress.engine)
        case .completed(let file): .completed(file)
        case .failed(let error): .failed(error.engine)
        case .cancelled: .cancelled
        }
    }
}
