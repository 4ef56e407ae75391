import CHaul
import HaulIO
import HaulValues

/// A transfer as its owner, the ``Scheduler``, sees it (as AsyncHTTPClient's pool sees a request
/// through `HTTPSchedulableRequest`): nine members and a lookup. ``Transfer`` is the one kind; the
/// rest of it is internal to `HaulTransfer`, which the compiler refuses to the scheduler.
package protocol ScheduledTransfer: AnyObject {
    /// The download it carries.
    var id: DownloadID { get }
    /// The handle callers hold (URL, destination, state directory, counts, events).
    var handle: LiveDownload { get }
    /// `host:port`, the key of per-host limits.
    var hostKey: String { get }
    /// Tells it what happened; returns what reaches beyond it, or `nil` when the input is not for
    /// it now.
    func apply(_ input: TransferInput) -> SlotAction?
    /// Its connections in curl, and whether another one would have work.
    var connections: (live: Int, wantsMore: Bool) { get }
    /// Opens connections while it wants them and `mayOpen` allows.
    func openConnections(while mayOpen: (_ live: Int) -> Bool)
    /// The checkpoint: buffered bytes written and recorded, and the job that syncs them.
    func checkpointReceiving() -> DiskJob?
    /// The periodic sweep: buffers given back, and the requests that stalled.
    func sweep(now: UInt64, stallTimeout: UInt64) -> [UnsafeMutableRawPointer]
    /// Its first answer (over HTTP/2 or not, and the sockets opened by then), once.
    func takeAnswer() -> (multiplexes: Bool, socketsOpened: UInt64)?
    /// The transfer whose request handle `raw` is, if any.
    static func owning(_ raw: UnsafeMutableRawPointer) -> Self?
}

extension Transfer: ScheduledTransfer {}
