import FoundationEssentials
import HaulValues

/// One call that downloads and waits, with the task's cancellation meaning "stop for now".
extension DownloadManager {
    /// Downloads `request`'s file and returns its destination once it is whole there: a
    /// ``download(_:)`` and its ``Download/finished()`` in one call.
    ///
    /// Cancelling the calling task pauses the download: its connection is released, the bytes on
    /// disk and the journal row are kept, and this call throws `CancellationError`. A later `fetch`
    /// of the same destination (in this process or the next) resumes from those bytes. The file may
    /// have completed just before the cancellation took effect: the later call then returns at once.
    ///
    /// ```swift
    /// let task = Task { try await manager.fetch(url, to: destination) }
    /// task.cancel()                       // paused, its bytes kept
    /// try await manager.fetch(url, to: destination)   // continues where it stopped
    /// ```
    ///
    /// (A task waiting on ``Download/finished()`` itself only stops waiting when cancelled: that
    /// download goes on, as other waiters may still want it.)
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled (before the call, or while
    ///   the download runs); otherwise what ``download(_:)`` and ``Download/finished()`` throw.
    public func fetch(_ request: DownloadRequest) async throws -> URL {
        try Task.checkCancellation()
        let download = try download(request)
        return try await withTaskCancellationHandler {
            try await download.finished()
        } onCancel: {
            download.pause()
        }
    }

    /// Downloads `url` to `destination` and returns it once the file is whole there; see
    /// ``fetch(_:)``.
    public func fetch(_ url: URL, to destination: URL, priority: Int = 0) async throws -> URL {
        try await fetch(DownloadRequest(url: url, destination: destination, priority: priority))
    }
}
