/// What Haul remembers about one download between runs: the total length the first time it is known,
/// the validators that pin a resume to one version of the remote file, how many bytes are on disk,
/// and how it stands.
struct DownloadRecord: Equatable, Sendable {
    /// How a download stands in the journal.
    enum State: String, Sendable {
        /// Waiting in the queue for a slot.
        case queued
        /// Admitted: a transfer holds it (or held it when its process stopped).
        case running
        /// It was queued or running when the process that ran it stopped; it continues when a
        /// manager resumes unfinished downloads, or when it is asked for again.
        case interrupted
        case paused
        case completed
        case failed
    }

    var url: String
    var destination: String
    var totalBytes: Int64?
    var entityTag: String?
    var lastModified: String?
    /// Bytes of the partial file at the last checkpoint (pause, failure, completion, shutdown).
    var bytesCommitted: Int64 = 0
    /// Bytes of the partial file known to be on stable storage (`fdatasync`ed before this was
    /// recorded): after a reboot the partial is cut back to this length.
    var bytesSynced: Int64 = 0
    var state: State = .queued
    var attempts = 0
    var lastError: String?
    var priority = 0
    var expectedChecksum: String?
    /// The queue's order within one priority (first in, first out): a manager-wide increasing value.
    var queueSequence: Int64 = 0
    /// `host:port`, for limits per host.
    var host: String = ""
    /// The complete file at the destination is to be revalidated by a conditional request.
    var revalidate = false
    /// Consecutive attempts that failed transiently without progress (the retry budget's count).
    var failures = 0
    /// When a queued download may be admitted (seconds since 1970; 0 = at once): a retry's backoff.
    var retryAt: Double = 0
    /// The file's length, when the requester knows it.
    var expectedSize: Int64?

    var completed: Bool { state == .completed }

    /// The bytes on disk at the last checkpoint, as progress.
    var progress: DownloadProgress { DownloadProgress(bytesReceived: bytesCommitted, totalBytes: totalBytes) }

    /// Whether the download still has work to do (not completed, not failed).
    var isUnfinished: Bool { state != .completed && state != .failed }

    /// Whether a response was accepted or bytes recorded for this download: only then may its
    /// partial file hold bytes worth resuming. Bytes in the partial file of any other row were written
    /// in a loop turn whose journal commit was lost (a crash), with no validator recorded: they are
    /// not continued, and the file is not even looked at.
    var mayHaveStarted: Bool { attempts > 0 || bytesCommitted > 0 || bytesSynced > 0 }

    /// The validator for `If-Range`: a strong ETag, else Last-Modified (RFC 9110 §13.1.5).
    var ifRangeValidator: String? {
        if let entityTag, !entityTag.hasPrefix("W/") { return entityTag }
        return lastModified
    }
}
