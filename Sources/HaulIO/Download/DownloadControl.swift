/// What a caller asks of one download (``Download/pause()``, ``Download/resume()``,
/// ``Download/cancel()``), carried to the manager's loop thread.
package enum DownloadControl: Sendable {
    case pause
    case resume
    case cancel
    /// A limit of its own, in bytes per second (`nil`: the manager's default per download).
    case limitRate(Int64?)
    /// Its row and partial file went to another manager (``DownloadManager/handOver(_:to:)``): what
    /// the loop kept of it goes, and its handle ends as cancelled here.
    case handedOver
}
