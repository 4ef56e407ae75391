import FoundationEssentials
import HaulValues

/// Where a download is in its life, as the layers below keep it: the public `DownloadState`, case
/// for case (it says what each means). The state follows the download's events by ``after(_:)``.
package enum DownloadState: Sendable, Hashable {
    case queued
    case connecting
    case receiving
    case paused
    case completed(URL)
    indirect case failed(DownloadError)
    indirect case waitingToRetry(DownloadError, after: Duration)
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
