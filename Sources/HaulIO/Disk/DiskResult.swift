import HaulValues

/// What came of a ``DiskJob``.
package enum DiskResult: Sendable {
    /// The partial file's first `bytes` are durable (`bytes` is negative when the sync failed).
    case synced(DownloadID, directory: String, bytes: Int64, segments: String? = nil)
    /// The file is at its destination, or why it is not.
    case placed(DownloadID, Result<PlacedFile, DownloadError>)
}
