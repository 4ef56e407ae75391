/// Where a download's controls go: the manager's loop, which carries them out in order.
protocol DownloadController: AnyObject, Sendable {
    /// Queues `control` for `download`; any thread.
    func submit(_ control: DownloadControl, for download: Download)
}
