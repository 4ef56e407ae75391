import FoundationEssentials
import HaulIO
import HaulValues

/// What a transfer hands its owner, the ``Scheduler``, once it carried out its machine's action
/// (``Transfer/slotAction(for:interruptedByShutdown:)``): only the part that reaches beyond it, to its
/// slot, the queue, the hooks, the disk lanes and the connection budget. Its own part (requests
/// stopped, sink closed, row written or removed, event published) is done by then.
///
/// The only way up from a transfer. It is returned to the owner's call; a transfer that acts with no
/// caller (inside curl's write callback, which runs inside `curl_multi_socket_action`, or in the
/// rate limiter's timer) hands it to ``TransferEnvironment/deferred``, which the owner performs at
/// the end of the loop turn as it performs a returned one.
package enum SlotAction {
    /// It goes on in its slot.
    case none
    /// It waits in its slot for the values of the headers its row names: the owner asks the
    /// application's header provider.
    case askForHeaders(HeadersQuestion)
    /// It waits in its slot for a fresh URL after a 401, 403 or 410: the owner asks the
    /// application's URL refresher.
    case askForFreshURL(FreshURLQuestion)
    /// It paused (the user's pause, or the manager's shutdown, which the row records as interrupted
    /// for the next manager to continue) and left the loop, a row again: `sync` makes its partial
    /// file's bytes durable (`nil`: they are), and its slot is freed.
    case paused(sync: DiskJob?)
    /// It ended (failed or cancelled): its slot is freed and what the process kept for it beyond
    /// its row is forgotten.
    case end
    /// It waits to retry at `time` (seconds since 1970), a row again: `sync` makes its bytes
    /// durable, its slot is freed, and its queue is looked at again then; its `restarts` from zero
    /// since it last progressed are carried to its next attempt.
    case retry(at: Double, sync: DiskJob?, restarts: Int)
    /// Every byte is received: `job` places the file off the loop, and its slot counts as
    /// finishing until the job's result (``Transfer/placed(_:)``).
    case finish(FinishJob)
    /// Every byte is received into a stream: it completes once the reader took them (its slot
    /// stays taken until then).
    case finishStream
    /// It is fetched over several connections and another one would have work: the owner opens
    /// them, at the end of the loop turn, as far as ``Admission`` allows.
    case openConnections
    /// Its request's first answer came (``Transfer/takeAnswer()`` says over which HTTP): the owner's
    /// grant of connections to its host learns what the host speaks (asked for when it was
    /// admitted, ``TransferInput/admit(needsHeaders:reportsAnswer:)``).
    case answered
    /// Its first answer sent it to another host, and curl let go of its stream here: it no longer
    /// counts against its host's streams (``Transfer/leavesHost``).
    case leftHost
}

/// What the header provider is asked for a download restored from the journal (which holds header
/// names only): the `names`, its URL as its row holds it and its destination.
package struct HeadersQuestion {
    package let names: [String]
    package let url: URL
    package let destination: URL
    /// The URL its errors name.
    package let urlForErrors: String
}

/// What the URL refresher is asked after `cause` (a 401, 403 or 410): the URL in use (credentials
/// removed) and the destination.
package struct FreshURLQuestion {
    package let cause: DownloadError
    package let url: URL
    package let destination: URL
    /// The URL its errors name.
    package let urlForErrors: String
}
