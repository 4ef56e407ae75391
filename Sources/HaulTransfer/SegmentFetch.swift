import CHaul
import Dispatch
import FoundationEssentials
import Glibc
import HaulIO
import HaulValues

/// One connection of a download fetched over several, beyond the transfer's own request: it fetches
/// one segment at a time with `Range: bytes=a-b` and `If-Range`, into a ``FileSink`` of its own at the
/// segment's place in the partial file. Its answer must be the file the transfer fetches (length and
/// validator). Owned by its transfer's ``Segments``; loop thread only.
final class SegmentFetch {
    unowned let transfer: Transfer
    /// The start of the segment it fetches (a segment's identity in the map).
    var start: Int64
    let sink: FileSink
    var easy: EasyHandle?
    /// Its answer was checked and is the transfer's file.
    var answered = false
    /// Its segment is whole: what the server still sends is not wanted (a split shortened it).
    var ended = false
    /// Its answer is another version of the file.
    var changed: RestartReason?
    /// Why its answer was refused, once it was.
    var error: DownloadError?
    /// curl holds it paused for the rate limiter.
    var parkedByLimiter = false
    /// The form of its `If-Range` (``IfRangeForm``), and whether its answer showed that the server
    /// ignores that form: the same range is asked again in the next one.
    var ifRangeForm = IfRangeForm.validator
    var asksAgain = false
    /// Its bytes when they last changed, and when: what tells a stall (``Transfer/stalledRequests(now:after:)``).
    var stallMark: (bytes: Int64, since: UInt64)?
    /// Ended by the stall sweep after this many seconds without data: what its failure says.
    var stalledFor: Int64?
    /// When its request went out (uptime nanoseconds), and its segment's bytes then: its speed.
    var requestedAt: UInt64 = 0
    var writtenAtRequest: Int64 = 0

    init(transfer: Transfer, start: Int64, sink: FileSink) {
        self.transfer = transfer
        self.start = start
        self.sink = sink
    }

    static let writeCallback: CHaul_data_callback = { pointer, size, count, context in
        let fetch = Unmanaged<SegmentFetch>.fromOpaque(context!).takeUnretainedValue()
        return fetch.transfer.receive(UnsafeRawBufferPointer(start: pointer, count: size * count), for: fetch)
    }

    /// The rate limiter unpauses it: curl gives the chunk it kept again.
    func unparked() {
        guard parkedByLimiter, let easy else { return }
        parkedByLimiter = false
        let code = curl_easy_pause(easy.raw, 0)  // CURLPAUSE_CONT: the kept chunk is given again now
        if code != CURLE_OK { transfer.environment.refusedWhenUnpausing(easy.raw, code: code) }
    }
}
