import HaulValues

/// A download's row in the journal (every other kind of row is a view of it: a queued row read
/// for admission, a followed one, a listed one, `JournalEntry` for callers). What Haul remembers about
/// one download between runs: the total length the first time it is known,
/// the validators that pin a resume to one version of the remote file, how many bytes are on disk,
/// and how it stands.
package struct JournalRow: Equatable, Sendable {
    package var url: String
    package var destination: String
    package var totalBytes: Int64?
    package var entityTag: String?
    package var lastModified: String?
    /// `lastModified` is a strong validator (``HTTPDate/isStrong(lastModified:date:)``): a resume may
    /// send it in `If-Range`.
    package var lastModifiedIsStrong: Bool = false
    /// Bytes of the partial file at the last checkpoint (pause, failure, completion, shutdown).
    package var bytesCommitted: Int64 = 0
    /// Bytes of the partial file known to be on stable storage (`fdatasync`ed before this was
    /// recorded): after a reboot the partial is cut back to this length.
    package var bytesSynced: Int64 = 0
    /// Changed only through ``apply(_:)``, the row's state machine (or set by a new record).
    package var state: QueueState = .queued
    package var attempts: Int = 0
    package var lastError: String?
    package var priority: Int = 0
    package var expectedChecksum: String?
    /// The queue's order within one priority (first in, first out): a manager-wide increasing value.
    package var queueSequence: Int64 = 0
    /// `host:port`, for limits per host.
    package var host: String = ""
    /// The complete file at the destination is to be revalidated by a conditional request.
    package var revalidate: Bool = false
    /// Consecutive attempts that failed transiently without progress (the retry budget's count).
    package var failures: Int = 0
    /// When a download waiting to retry may be admitted (seconds since 1970; 0 when it is not waiting).
    var retryAt: Double = 0
    /// The file's length, when the requester knows it.
    package var expectedSize: Int64?
    /// The destination's modification time when Haul placed the complete file there (or a
    /// revalidation kept it), seconds since 1970: a file with another time or length was changed
    /// by someone else since.
    package var placedModificationTime: Double?
    /// The `User-Agent` its requests send, when not the manager's.
    package var userAgent: String?
    /// The names of the headers the download was asked for with (never their values, which stay in
    /// memory): a restored download needs them again before it is sent.
    package var headerNames: [String] = []
    /// For a download that takes its file name from the server: its folder. Until the name is
    /// chosen, `destination` is this folder; then it is the file, which it stays.
    package var folder: String?
    /// Every URL of a download with mirrors, in the order asked for (its first URL first), without
    /// user names and passwords; empty without mirrors.
    package var mirrors: [String] = []
    /// Its own rate limit, in bytes per second.
    package var maxBytesPerSecond: Int64?
    /// How many connections it may fetch its file over (``DownloadRequest/connections``); `nil`: the
    /// manager's ``DownloadManager/Configuration/connectionsPerFile``.
    package var connections: Int?
    /// A download fetched over several connections: its ``SegmentMap`` in the journal's form (each
    /// segment's range, bytes written and bytes synced). The partial file's length says nothing
    /// then: this does.
    package var segments: String?
    /// A file found at the destination when the download is placed is kept (the name was chosen
    /// for the caller, not named by it: ``DownloadRequest/replacesExistingFile``); the download
    /// goes to `name.1`, `name.2`… instead.
    package var keepsExistingFile: Bool = false
    /// The file a disk lane was about to move into place (``PlacedFile/identity``), recorded by it
    /// before the move (``Journal/recordPlacing(_:identity:)``) and cleared when the row is written
    /// completed: a row that still has it after its process was killed finds its file placed.
    /// Only that lane writes it; the loop's writes keep it.
    package var placing: String?

    package init(
        url: String,
        destination: String,
        totalBytes: Int64? = nil,
        entityTag: String? = nil,
        lastModified: String? = nil,
        lastModifiedIsStrong: Bool = false,
        bytesCommitted: Int64 = 0,
        bytesSynced: Int64 = 0,
        state: QueueState = .queued,
        attempts: Int = 0,
        lastError: String? = nil,
        priority: Int = 0,
        expectedChecksum: String? = nil,
        queueSequence: Int64 = 0,
        host: String = "",
        revalidate: Bool = false,
        failures: Int = 0,
        retryAt: Double = 0,
        expectedSize: Int64? = nil,
        placedModificationTime: Double? = nil,
        userAgent: String? = nil,
        headerNames: [String] = [],
        folder: String? = nil,
        mirrors: [String] = [],
        maxBytesPerSecond: Int64? = nil,
        connections: Int? = nil,
        segments: String? = nil,
        keepsExistingFile: Bool = false,
        placing: String? = nil
    ) {
        self.url = url
        self.destination = destination
        self.totalBytes = totalBytes
        self.entityTag = entityTag
        self.lastModified = lastModified
        self.lastModifiedIsStrong = lastModifiedIsStrong
        self.bytesCommitted = bytesCommitted
        self.bytesSynced = bytesSynced
        self.state = state
        self.attempts = attempts
        self.lastError = lastError
        self.priority = priority
        self.expectedChecksum = expectedChecksum
        self.queueSequence = queueSequence
        self.host = host
        self.revalidate = revalidate
        self.failures = failures
        self.retryAt = retryAt
        self.expectedSize = expectedSize
        self.placedModificationTime = placedModificationTime
        self.userAgent = userAgent
        self.headerNames = headerNames
        self.folder = folder
        self.mirrors = mirrors
        self.maxBytesPerSecond = maxBytesPerSecond
        self.connections = connections
        self.segments = segments
        self.keepsExistingFile = keepsExistingFile
        self.placing = placing
    }

    /// The same request as a new row: queued, nothing fetched (its length, validators, bytes,
    /// segments, placement and chosen name forgotten).
    package var restarted: JournalRow {
        var record = JournalRow(url: url, destination: folder ?? destination)
        record.queueSequence = queueSequence
        record.host = host
        record.folder = folder
        record.takeRequest(of: self)
        return record
    }

    /// Takes what `other`'s request asked for (priority, checksum, size, user agent, header names,
    /// mirrors, rate, connections, whether a file found is kept); the bytes and validators stay.
    package mutating func takeRequest(of other: JournalRow) {
        priority = other.priority
        expectedChecksum = other.expectedChecksum
        expectedSize = other.expectedSize
        userAgent = other.userAgent
        headerNames = other.headerNames
        mirrors = other.mirrors
        maxBytesPerSecond = other.maxBytesPerSecond
        connections = other.connections
        keepsExistingFile = other.keepsExistingFile
    }

    /// Whether a file found at the destination when the download is placed is kept, the download
    /// moving on to `name.1`, `name.2`…: a name chosen for the caller (``keepsExistingFile``) or by
    /// the server (``folder``).
    package var movesPastFilesFound: Bool { keepsExistingFile || folder != nil }

    /// A download into a folder whose file name is not chosen yet.
    package var awaitsName: Bool { folder != nil && destination == folder }

    /// The bytes on disk at the last checkpoint, as progress.
    package var progress: DownloadProgress { DownloadProgress(bytesReceived: bytesCommitted, totalBytes: totalBytes) }

    /// Whether the download still has work to do (not completed, not failed).
    package var isUnfinished: Bool { state.isUnfinished }

    /// Whether a response was accepted or bytes recorded for this download: only then may its
    /// partial file hold bytes worth resuming. Bytes in the partial file of any other row were written
    /// in a loop turn whose journal commit was lost (a crash), with no validator recorded: they are
    /// not continued, and the file is not even looked at.
    package var mayHaveStarted: Bool { attempts > 0 || bytesCommitted > 0 || bytesSynced > 0 }

    /// The validator for `If-Range` (RFC 9110 §13.1.5): a strong ETag, else a strong Last-Modified;
    /// `nil` when there is neither, and nothing proves that the partial file's bytes are the remote
    /// file's current ones.
    package var ifRangeValidator: String? {
        if let entityTag, !entityTag.hasPrefix("W/") { return entityTag }
        return lastModifiedIsStrong ? lastModified : nil
    }
}
