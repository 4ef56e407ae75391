/// What happens to a download's queue row, from a request, a caller's command, the loop's transfer
/// or its process; ``QueueState/after(_:)`` says what each does in each state.
package enum QueueEvent: Equatable, Sendable {
    /// Asked for again: a paused, interrupted or failed download is queued again (at the end of its
    /// priority, `sequence`); one already queued, waiting or running is left as it is; a completed
    /// one is refused (the caller checks its file and revalidates or fetches it anew).
    case requested(sequence: Int64)
    /// A completed file is to be revalidated by a conditional request.
    case revalidationRequested(sequence: Int64)
    /// The loop admitted it: a transfer holds it now.
    case admitted
    /// Its caller paused it.
    case paused
    /// Its caller resumed it.
    case resumed(sequence: Int64)
    /// Its caller cancelled it: the row says so, with nothing fetched kept.
    case cancelled
    /// A checkpoint while its transfer receives.
    case progressed
    /// A transient failure: it waits until `at` (seconds since 1970) and retries.
    case retryScheduled(at: Double, error: String)
    /// It failed for good (the row is kept when the partial file holds bytes).
    case failed(error: String)
    /// Its file is in place.
    case completed
    /// The process that ran it is stopping, or stopped without saying so (a journal opened by the
    /// next process finds it queued or running).
    case interrupted
    /// A manager that resumes unfinished downloads takes it up again.
    case continued
}
