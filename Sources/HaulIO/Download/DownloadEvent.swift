import FoundationEssentials
import HaulValues

/// What a download's hub publishes, as the layers below know it: the public `DownloadEvent`, case
/// for case (it says what each means), into which the facade turns each as it is read.
package enum DownloadEvent: Sendable, Hashable {
    case queued
    case connecting(DownloadProgress)
    case receiving(DownloadProgress)
    case progress(DownloadProgress)
    case restarted(RestartReason)
    indirect case waitingToRetry(DownloadError, after: Duration)
    case warning(DownloadWarning)
    indirect case switchedURL(URL, after: DownloadError)
    case paused(DownloadProgress)
    case completed(URL)
    indirect case failed(DownloadError)
    case cancelled

    /// Whether this is the last event of a download.
    package var isFinal: Bool {
        switch self {
        case .completed, .failed, .cancelled: true
        default: false
        }
    }
}
