import CHaul
import Dispatch
import HaulIO
import HaulValues

/// One connection of a transfer and the request on it: the transfer's own (``Transfer/own``), whose
/// answer the download's machine decides and whose sink is the partial file's (or the stream's)
/// across its requests, and, for a download over several connections, each other one (``Segments``),
/// which fetches one segment at a time with `Range: bytes=a-b` and `If-Range` into a sink of its own.
/// What a request has (handle, sink, range, `If-Range` form, who holds it paused, stall mark, error)
/// and what is done to it (begun, held and let go, stopped, swept for a stall, found from its curl
/// handle) is written here once for both. Loop thread only.
final class Connection {
    unowned let transfer: Transfer
    /// Its curl handle, while a request is out.
    var easy: EasyHandle?
    /// Where its bytes go.
    var sink: FileSink?
    /// The start of the segment it fetches (a segment's identity in the map), over several connections.
    var segment: Int64?
    /// When it began on its segment (uptime nanoseconds), and the segment's bytes then: its speed there.
    var since: (at: UInt64, written: Int64) = (0, 0)
    /// `Range: bytes=rangeStart-rangeLast` of its request (`rangeLast` nil: to the end of the file).
    var rangeStart: Int64 = 0
    var rangeLast: Int64?
    /// The form of its request's `If-Range` (``IfRangeForm``).
    var ifRangeForm = IfRangeForm.validator
    /// Who holds it paused in curl, if anyone: curl keeps the chunk it refused and gives it again
    /// once let go (``letGo(by:)``).
    var heldBy: Holder?
    /// Its bytes when they last changed, and when (uptime nanoseconds): what tells a stall.
    var stallMark: (bytes: Int64, since: UInt64)?
    /// Set when the stall sweep ended its request for receiving nothing for this many seconds.
    var stalledFor: Int64?
    /// Why its body was refused, once it was (the first error).
    var error: DownloadError?
    /// Its segment is whole: what the server still sends belongs to other segments.
    var segmentEnded = false
    /// What another connection's answer was found to be (``Segments/Verdict``), once it was.
    var verdict: Segments.Verdict?

    /// Who holds a request paused.
    enum Holder {
        /// Its transfer's buckets are in debt (``RateLimiter``).
        case rateLimiter
        /// The stream's reader has not taken the bytes before (``Transfer+Stream``).
        case reader
    }

    init(transfer: Transfer, sink: FileSink? = nil) {
        self.transfer = transfer
        self.sink = sink
    }

    /// A new request for `rangeStart...rangeLast` goes out, its `If-Range` in `form`: what the last one
    /// said (its error, its stall, its answer) is forgotten.
    func begin(from rangeStart: Int64, to rangeLast: Int64?, ifRange form: IfRangeForm) {
        (self.rangeStart, self.rangeLast, ifRangeForm) = (rangeStart, rangeLast, form)
        (stalledFor, error, segmentEnded, verdict) = (nil, nil, false, nil)
    }

    /// It begins on `segment` (one of the map's), with what the segment holds now.
    func take(_ segment: SegmentMap.Segment) {
        self.segment = segment.start
        since = (transfer.clock.uptimeNanoseconds, segment.written)
    }

    /// curl's write callback of every request of a transfer: the chunk goes to the transfer, which
    /// knows which of its connections it is for.
    static let writeCallback: CHaul_data_callback = { pointer, size, count, context in
        let connection = Unmanaged<Connection>.fromOpaque(context!).takeUnretainedValue()
        return connection.transfer.receive(UnsafeRawBufferPointer(start: pointer, count: size * count), on: connection)
    }

    /// The connection whose request handle `raw` is, from the handle's context; `nil` for a handle
    /// of none.
    static func of(_ raw: UnsafeMutableRawPointer) -> Connection? {
        guard let context = EasyHandle.context(of: raw) else { return nil }
        return Unmanaged<AnyObject>.fromOpaque(context).takeUnretainedValue() as? Connection
    }

    /// `holder` lets it go: curl gives the chunk it kept again now, inside `curl_easy_pause`. curl
    /// reports a chunk refused there (a write that failed) as the call's error, and never as the
    /// request's end: the transfer ends the request with it, as if curl had, and hands up what
    /// follows (the rate limiter's timer and a stream's watch have no caller to return it to).
    func letGo(by holder: Holder) {
        guard heldBy == holder, let easy else { return }
        heldBy = nil
        let code = curl_easy_pause(easy.raw, 0)  // CURLPAUSE_CONT
        guard code != CURLE_OK, let action = transfer.ended(request: easy.raw, result: code) else { return }
        transfer.environment.hand(action, from: transfer)
    }

    /// Takes its request out of curl: the handle goes back to the pool, or away if curl holds it
    /// paused (with a chunk it kept); whether the request opened a connection is counted.
    func stop() {
        guard let easy else { return }
        transfer.environment.reactor.remove(easy.raw)
        transfer.countConnection(of: easy)
        if let heldBy {
            if heldBy == .rateLimiter { transfer.environment.rateLimiter.forget(self) }
            self.heldBy = nil
        } else {
            transfer.environment.easyHandles.recycle(easy)
        }
        self.easy = nil
    }

    /// Whether its request received nothing for `timeout` (a request someone holds paused, or none,
    /// is not stalled); moves the mark when its bytes changed.
    func hasStalled(now: UInt64, after timeout: UInt64) -> Bool {
        guard easy != nil, heldBy == nil else {
            stallMark = nil
            return false
        }
        let bytes = sink?.receivedLength ?? 0
        guard let seen = stallMark, seen.bytes == bytes else {
            stallMark = (bytes, now)
            return false
        }
        return now &- seen.since >= timeout
    }
}
