import FoundationEssentials
import HaulIO
import HaulValues

/// What a transfer hands its owner, the ``Scheduler``, once it carried out its machine's action
/// (``Transfer/slotAction(for: _:interruptedByShutdown:)``): only the part that reaches beyond it, to its
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
    /// It waits in its slot for the values of the headers its row names (`names`): the owner asks
    /// the application's header provider.
    case askForHeaders(names: [String])
    /// It waits in its slot for a fresh URL after `cause` (401, 403, 410): the owner asks the
    /// application's URL refresher.
    case askForFreshURL(after: DownloadError)
    /// It paused (the user's pause, or the manager's shutdown, which the row records as interrupted
    /// for the next manager to continue) and left the loop, a row again: its first `sync` bytes are
    /// synced, and its slot is freed.
    case paused(sync: Int64)
    /// It ended (failed or cancelled): its slot is freed and what the process kept for it beyond
    /// its row is forgotten.
    case end
    /// It waits to retry at `time` (seconds since 1970), a row again: its first `sync` bytes are
    /// synced, its slot is freed, and its queue is looked at again then.
    case retry(at: Double, sync: Int64)
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
    /// grant of connections to its host learns what the host speaks (asked for by
    /// ``Transfer/reportsAnswer``).
    case answered
    /// Its first answer sent it to another host, and curl let go of its stream here: it no longer
    /// counts against its host's streams (``Transfer/leavesHost``).
    case leftHost
}
