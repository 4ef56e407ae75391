/// What a caller asks of one download (``Download/pause()``, ``Download/resume()``,
/// ``Download/cancel()``), carried to the manager's loop thread.
enum DownloadControl: Sendable {
    case pause
    case resume
    case cancel
}

/// Where a download's controls go: the manager's loop, which carries them out in order.
protocol DownloadController: AnyObject, Sendable {
    /// Queues `control` for `download`; any thread.
    func submit(_ control: DownloadControl, for download: Download)
}
