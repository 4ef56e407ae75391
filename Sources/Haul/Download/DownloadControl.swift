/// What a caller asks of one download (``Download/pause()``, ``Download/resume()``,
/// ``Download/cancel()``), carried to the manager's loop thread.
enum DownloadControl: Sendable {
    case pause
    case resume
    case cancel
    /// A limit of its own, in bytes per second (`nil`: the manager's default per download).
    case limitRate(Int64?)
}
