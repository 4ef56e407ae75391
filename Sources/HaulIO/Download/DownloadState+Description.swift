import FoundationEssentials
import HaulValues

// A download's state and events read as a person reads them (`print(event)`, a log line), in the
// units of ``DownloadProgress``'s description. URLs are shown redacted.

extension DownloadState: CustomStringConvertible {
    /// "receiving", "paused", "completed: /data/big.iso", "failed: <the error's sentence>"…
    package var description: String {
        switch self {
        case .queued: "queued"
        case .connecting: "connecting"
        case .receiving: "receiving"
        case .paused: "paused"
        case .completed(let file): "completed: \(file.path)"
        case .failed(let error): "failed: \(error)"
        case .waitingToRetry(let error, let delay):
            "waiting \(HumanUnits.duration(delay)) to retry after: \(error)"
        case .cancelled: "cancelled"
        }
    }
}

extension DownloadEvent: CustomStringConvertible {
    /// The event's name and what it carries: "progress: 4.0 MiB of 32.0 MiB, 12.0 MiB/s, 3 s left",
    /// "restarted: the remote file changed", "completed: /data/big.iso"…
    package var description: String {
        switch self {
        case .queued: "queued"
        case .connecting(let progress): "connecting (\(progress))"
        case .receiving(let progress): "receiving: \(progress)"
        case .progress(let progress): "progress: \(progress)"
        case .restarted(let reason): "restarted: \(reason)"
        case .waitingToRetry(let error, let delay):
            "waiting \(HumanUnits.duration(delay)) to retry after: \(error)"
        case .warning(let warning): "warning: \(warning)"
        case .switchedURL(let url, let error): "switched to \(url.redactedString) after: \(error)"
        case .paused(let progress): "paused at \(progress)"
        case .completed(let file): "completed: \(file.path)"
        case .failed(let error): "failed: \(error)"
        case .cancelled: "cancelled"
        }
    }
}
