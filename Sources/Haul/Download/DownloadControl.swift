/// What a caller asks of one download (``Download/pause()``, ``Download/resume()``,
/// ``Download/cancel()``), carried to the manager's loop thread.
enum DownloadControl: Sendable {
    case pause
    case resume
    case cancel
}
