import FoundationEssentials
import HaulIO
import HaulValues

/// Where a download is in its life. `completed`, `failed` and `cancelled` are final.
///
/// One word per meaning, the same in ``DownloadEvent``, ``JournalEntry/state`` (``QueueState``),
/// `haul --list` and `--json`: `queued` (waiting for a slot), `waitingToRetry`, `paused`,
/// `completed`, `failed`, `cancelled`; `connecting` and `receiving` are what the journal and the
/// fleet call `running`. The state follows the download's events by ``after(_:)``.
public enum DownloadState: Sendable, Hashable {
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
    public var isFinal: Bool {
        switch self {
        case .completed, .failed, .cancelled: true
        case .queued, .connecting, .receiving, .paused, .waitingToRetry: false
        }
    }

    /// The state after `event`: the one place where a download's public state follows its events
    /// (its handle's ``Download/state``, and what a new subscriber is shown first). An event that
    /// changes no state (progress, a restart, a warning, a switched URL) leaves it as it is.
    public func after(_ event: DownloadEvent) -> DownloadState {
        DownloadState(engine.after(event.engine))
    }
}

extension DownloadState: CustomStringConvertible {
    /// "receiving", "paused", "completed: /data/big.iso", "failed: <the error's sentence>"…
    public var description: String { engine.description }
}

extension DownloadState {
    /// The state as the layers below keep it.
    init(_ state: HaulIO.DownloadState) {
        switch state {
        case .queued: self = .queued
        case .connecting: self = .connecting
        case .receiving: self = .receiving
        case .paused: self = .paused
        case .completed(let file): self = .completed(file)
        case .failed(let error): self = .failed(DownloadError(error))
        case .waitingToRetry(let error, let delay): self = .waitingToRetry(DownloadError(error), after: delay)
        case .cancelled: self = .cancelled
        }
    }

    /// The state as the layers below know it.
    var engine: HaulIO.DownloadState {
        switch self {
        case .queued: .queued
        case .connecting: .connecting
        case .receiving: .receiving
        case .paused: .paused
        case .completed(let file): .completed(file)
        case .failed(let error): .failed(error.engine)
        case .waitingToRetry(let error, let delay): .waitingToRetry(error.engine, after: delay)
        case .cancelled: .cancelled
        }
    }
}
