import CHaul
import FoundationEssentials
import HaulIO
import HaulValues

/// What its owner, the ``Scheduler``, tells a transfer (``Transfer/apply(_:)``): every input of
/// its life but curl's write callback, which reaches it directly. Answered with what reaches beyond
/// it (``SlotAction``), or `nil` when the input is not for it now (a hook's answer it no longer
/// waits for, a handle that is no request of its own, a segment map for a download over one
/// connection).
package enum TransferInput {
    /// A slot is free: the first request goes out, or the header provider is asked first
    /// (`needsHeaders`). `reportsAnswer`: its first answer is handed up for its host's grant
    /// (``SlotAction/answered``).
    case admit(needsHeaders: Bool, reportsAnswer: Bool)
    /// The header provider's values, checked (its first request goes out with them), or its failure.
    case headers(Result<[DownloadHeader], DownloadError>)
    /// The user paused.
    case pause
    /// The manager shuts down: paused as interrupted (the next manager continues it), unless it
    /// ended already.
    case shutdown
    /// The user cancelled.
    case cancel
    /// A local failure outside the transfer (a hook's).
    case fail(DownloadError)
    /// The URL refresher gave no fresh URL (or failed: `error`, logged): it goes on as the failure
    /// that made it ask says.
    case urlRefused(DownloadError?)
    /// The URL refresher gave `url`, checked (and `headers`, checked, which its requests send from
    /// now on and its row names).
    case freshURL(URL, headers: [DownloadHeader]?)
    /// The URL refresher gave a URL or headers that fail the checks: the download fails with `error`.
    case freshURLRejected(DownloadError)
    /// The request on handle `raw` ended with `result` (curl reported it done).
    case requestEnded(UnsafeMutableRawPointer, CURLcode)
    /// The request on handle `raw` received nothing for `seconds`: it ends as timed out.
    case stalled(UnsafeMutableRawPointer, seconds: Int64)
    /// The disk lanes placed its file, or failed to.
    case placed(Result<PlacedFile, DownloadError>)
    /// Its body went into a stream whole: `done` is called once the reader took every byte.
    case finishStream((Result<Int64, DownloadError>) -> Void)
    /// Its own rate limit, at once (and in its row for later attempts).
    case limitRate(Int64?)
    /// A caller asked for it again while it runs, and the row write changed the request's part of
    /// its row (`row`, as written): the checks its file must pass, its priority, rate limit… are the
    /// latest request's from now on.
    case asked(JournalRow)
    /// Its partial file's first `bytes` are durable.
    case synced(bytes: Int64)
    /// Over several connections: the segments' bytes in the snapshot are durable (`nil` back when it
    /// is fetched over one).
    case syncedSegments(String)
}
