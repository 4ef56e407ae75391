import FoundationEssentials
import HaulIO
import HaulValues

/// One download's event, as the manager's feed (``DownloadManager/events``) carries it.
public struct DownloadManagerEvent: Sendable, Hashable {
    /// Which download.
    public let id: DownloadID
    /// Where its file goes.
    public var destination: URL { URL(fileURLWithPath: destinationPath, isDirectory: false) }
    /// The path of ``destination``: made into a URL only when read, as most readers of a busy feed
    /// never do.
    public let destinationPath: String
    /// What happened.
    public let event: DownloadEvent
    /// The download's handle, which published the event: what a caller who queued it with
    /// ``DownloadManager/enqueue(_:)`` reads beside the event (``Download/bytesReceivedInThisProcess``,
    /// ``Download/wasAlreadyComplete``, ``Download/response``) or controls it with. `nil` for the
    /// `.queued` of a row that no handle shows yet (a download gets one when it is admitted, or
    /// found complete while someone follows the feed). Not part of equality. Made when read (the
    /// one a caller holds, else a new one), as most readers of a busy feed never do.
    public var download: Download? { live.map(Download.of) }
    private let live: LiveDownload?

    /// An event of download `id` to `destination`.
    public init(id: DownloadID, destination: URL, event: DownloadEvent, download: Download? = nil) {
        self.init(id: id, destinationPath: destination.path, event: event, live: download?.live)
    }

    /// The feed's event.
    init(_ event: FeedEvent) {
        self.init(
            id: DownloadID(event.id),
            destinationPath: event.destinationPath,
            event: DownloadEvent(event.event),
            live: event.download
        )
    }

    init(id: DownloadID, destinationPath: String, event: DownloadEvent, live: LiveDownload?) {
        self.id = id
        self.destinationPath = destinationPath
        self.event = event
        self.live = live
    }

    /// Equal when the same download had the same event at the same destination.
    public static func == (lhs: DownloadManagerEvent, rhs: DownloadManagerEvent) -> Bool {
        lhs.id == rhs.id && lhs.destinationPath == rhs.destinationPath && lhs.event == rhs.event
    }

    /// Hashes what equality compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(destinationPath)
        hasher.combine(event)
    }
}
