import FoundationEssentials
import HaulValues

/// Where a download is in its life. `completed`, `failed` and `cancelled` are final.
///
/// One word per meaning, the same in ``DownloadEvent``, ``JournalEntry/state`` (``QueueState``),
/// `haul --list` and `--json`: `queued` (waiting for a slot), `waitingToRetry`, `paused`,
/// `completed`, `failed`, `cancelled`; `connecting` and `receiving` are what the journal and the
/// fleet call `running`. The state follows the download's events by ``after(_:)``.
package enum DownloadState: Sendable, Hashable {
    /// Waiting for a free slot.
    case queued
    /// A request is out; no response accepted yet.
    case connecting
    /// Body bytes are being written to the partial file.
    case receiving
    /// Stopped by the user (or a shutdown); the partial file is kept.
    case paused
    /// The file is at its destination.
    case completed(URL)
    /// The download failed; the partial file is kept where resuming can use it.
    indirect case failed(DownloadError)
    /// An attempt failed transiently (the error says how); the download starts again after the
    /// delay announced, from the bytes on disk.
    indirect case waitingToRetry(DownloadError, after: Duration)
    /// The user cancelled; the partial file was deleted.
    case cancelled

    /// Whether this state is final.
    package var isFinal: Bool { event(progress: DownloadProgress(bytesReceived: 0, totalBytes: nil)).isFinal }

    /// The event that shows this state to a new subscriber, with the download's latest progress.
    func event(progress: DownloadProgress) -> DownloadEvent {
        switch self {
        case .queued: .queued
        case .waitingToRetry(let error, let delay): .waitingToRetry(error, after: delay)
        case .connecting: .connecting(progress)
        case .receiving: .receiving(progress)
        case .paused: .paused(progress)
        case .completed(let url): .completed(url)
        case .failed(let error): .failed(error)
        case .cancelled: .cancelled
        }
    }

    /// The state after `event`: the one place where a download's public state follows its events
    /// (its handle's ``Download/state``, and what a new subscriber is shown first). An event that
    /// changes no state (progress, a restart, a warning, a switched URL) leaves it as it is.
    package func after(_ event: DownloadEvent) -> DownloadState {
        switch event {
        case .queued: .queued
        case .connecting: .connecting
        case .receiving: .receiving
        case .waitingToRetry(let error, let delay): .waitingToRetry(error, after: delay)
        case .paused: .paused
        case .completed(let url): .completed(url)
        case .failed(let error): .failed(error)
        case .cancelled: .cancelled
        case .progress, .restarted, .warning, .switchedURL: self
        }
    }
}
