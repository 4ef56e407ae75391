/// Where a download's controls go: the manager's loop, which carries them out in order.
package protocol DownloadController: AnyObject, Sendable {
    /// Queues `control` for `download`; any thread.
    func submit(_ control: DownloadControl, for download: LiveDownload)
    /// Queues `control` for `download` and calls `answer` once, with the download's state, when
    /// the control settled (or at once when it cannot); any thread.
    func settle(
        _ control: DownloadControl,
        for download: LiveDownload,
        answer: @escaping @Sendable (DownloadState) -> Void
    )
}
