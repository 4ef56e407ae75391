import FoundationEssentials

/// One download's event, as the manager's feed (``DownloadManager/events``) carries it.
public struct DownloadManagerEvent: Sendable, Hashable {
    /// Which download.
    public let id: DownloadID
    /// Where its file goes.
    public let destination: URL
    /// What happened.
    public let event: DownloadEvent
}
