import HaulValues

/// One event on the manager's feed (``EventFeed``): which download published it, where its file
/// goes, and the download as the manager keeps it, when it has one. The facade makes each a public
/// `DownloadManagerEvent` as a reader takes it.
package struct FeedEvent: Sendable {
    package let id: DownloadID
    package let destinationPath: String
    package let event: DownloadEvent
    /// `nil` for the `.queued` of a row that no handle shows yet.
    package let download: LiveDownload?

    package init(id: DownloadID, destinationPath: String, event: DownloadEvent, download: LiveDownload?) {
        self.id = id
        self.destinationPath = destinationPath
        self.event = event
        self.download = download
    }
}
