import FoundationEssentials

/// Where a download is in its life. `completed`, `failed` and `cancelled` are final.
public enum DownloadState: Sendable, Hashable {
    /// Waiting for a free slot.
    case idle
    /// A request is out; no response accepted yet.
    case connecting
    /// Body bytes are being written to the partial file.
    case receiving
    /// Stopped by the user (or a shutdown); the partial file is kept.
    case paused
    /// The file is at its destination.
    case completed(URL)
    /// The download failed; the partial file is kept where resuming can use it.
    case failed(DownloadError)
    /// The user cancelled; the partial file was deleted.
    case cancelled

    /// Whether this state is final.
    public var isFinal: Bool { event(progress: DownloadProgress(bytesReceived: 0, totalBytes: nil)).isFinal }

    /// The event that shows this state to a new subscriber, with the download's latest progress.
    func event(progress: DownloadProgress) -> DownloadEvent {
        switch self {
        case .idle: .queued
        case .connecting: .connecting(progress)
        case .receiving: .receiving(progress)
        case .paused: .paused(progress)
        case .completed(let url): .completed(url)
        case .failed(let error): .failed(error)
        case .cancelled: .cancelled
        }
    }
}
