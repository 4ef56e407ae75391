import CHaul
import Dispatch
import FoundationEssentials
import Glibc
import HaulIO
import HaulValues

/// A download over several connections: when it splits, and what the transfer's own request does
/// with its segment. The bookkeeping is ``Segments``'; the other connections' requests are in
/// ``Transfer+Connections``.
extension Transfer {
    /// How many connections this download may use.
    var connectionsAllowed: Int { min(64, max(1, record.connections ?? environment.connectionsPerFile)) }

    /// Its connections in curl now: its own request and its segments' others.
    var liveConnections: Int { (own.easy != nil ? 1 : 0) + (segments?.others.count ?? 0) }

    /// Whether another connection would have work now (the scheduler grants it, ``Admission``).
    var wantsConnection: Bool {
        guard let segments, case .receiving = machine.state,
            liveConnections < segments.allowed
        else { return false }
        return segments.hasWorkForAnotherConnection(now: clock.uptimeNanoseconds)
    }

    /// Asks its owner for more connections, if they have work (``SlotAction/openConnections``,
    /// performed at the end of the loop turn: this runs inside curl's write callback).
    func askForConnections() {
        if wantsConnection { environment.hand(.openConnections, from: self) }
    }

    // MARK: planning

    /// The accepted answer announced `total` bytes: split the file when the download may use several
    /// connections, the server honours ranges (a 206, or a 200 with `Accept-Ranges: bytes`), the
    /// answer carries a strong validator (every segment's answer is checked against it), and the
    /// bytes left are at least two minimum segments. Runs before the answer's first byte is written.
    func planSegments(total: Int64?, head: ResponseHead, acceptsRanges: Bool) {
        guard segments == nil, !machine.overOneConnection, connectionsAllowed > 1, let total, let sink, !revalidating,
            urls.isEmpty, head.status == 206 || (head.status == 200 && acceptsRanges), request.rangeEnd == nil,
            record.ifRangeValidator != nil, head.contentEncoding == nil,
            total - sink.receivedLength >= 2 * environment.minimumSegmentSize,
            let made = Segments.plan(
                total: total,
                written: sink.receivedLength,
                connections: connectionsAllowed,
                minimumSize: environment.minimumSegmentSize,
                own: own,
                target: request.target ?? download.url,
                sendsHeaders: request.sendsHeaders
            )
        else { return }
        segments = made
        record.segments = made.map.encoded
        log(
            .debug,
            "split over connections",
            metadata: [
                "haul.segments": "\(made.map.segments.count)", "haul.total": "\(total)",
            ]
        )
    }

    /// A resumed download whose row holds a map: its segments again, the transfer's own request
    /// taking the first one left. A map that does not fit the row (or a URL that changed: the other
    /// URL's file is not proven yet) is dropped, and with it the partial's bytes.
    func restoreSegments() -> Bool {
        guard segments == nil, let text = record.segments else { return true }
        guard !revalidating, machine.move == nil, record.url == download.url.redactedString, urls.isEmpty,
            let total = record.totalBytes, record.ifRangeValidator != nil,
            let restored = Segments(
                restoring: text,
                total: total,
                connections: connectionsAllowed,
                minimumSize: environment.minimumSegmentSize,
                own: own,
                target: download.url
            )
        else {
            record.segments = nil
            return false
        }
        segments = restored
        return true
    }

    /// The first request of an attempt of a segmented download: the transfer's own request takes the
    /// first segment no connection fetches, and its sink moves there. Returns `false` when every
    /// segment is whole (nothing to ask for).
    func takeFirstSegmentLeft(_ sink: FileSink) throws(DownloadError) -> Bool {
        guard let segments else { return true }
        guard let segment = segments.ownTakesFirstLeft() else { return false }
        try sink.move(to: segment.next)
        return true
    }

    /// The decision on an answer to the transfer's own request for one segment: the same file (a 206
    /// from the asked byte with the same length and validator) is appended; another version (another
    /// validator of the pin's kind), or the whole file, starts over; an answer that names no version
    /// (an error page as 200) is a failed attempt; any other answer is decided as usual.
    func segmentDecision(_ head: ResponseHead, otherwise decision: ResponseDecision) -> ResponseDecision {
        guard let segments, let pin = record.pinnedVersion else { return decision }
        let match = pin.match(head)
        if match == .other, (200...299).contains(head.status) { versionsDiffered() }
        let answer = Segments.answer(
            status: head.status,
            contentRange: head.contentRange,
            contentLength: head.contentLength,
            match: match,
            total: segments.map.total,
            asked: own.rangeStart
        )
        switch answer {
        case .rest:
            return .append(total: segments.map.total)
        case .unproven:
            return .unproven(
                PinnedVersion.unprovenDetail(kind: pin.kind, contentType: head.contentType, length: head.contentLength)
            )
        case .changed(let reason) where head.status == 200:
            if reason == .rangeIgnored { machine.rangeRefused() }
            return .replace(total: head.contentLength, reason: reason)
        case .changed(let reason):
            return .retryFromZero(reason: reason)
        case .other:
            return decision
        }
    }

    /// Connections of this download were answered with different versions of the file. At the
    /// second time (two servers behind one name, each with its own version, as a load balancer
    /// spreads connections), the download goes on over one connection, on one version, and says why.
    func versionsDiffered() {
        guard machine.versionsDiffered() else { return }
        log(.debug, "connections got different versions of the file; one connection from now on")
        events.publish(.warning(.versionsDiffer))
    }

    /// Forgets the segments (the partial is emptied): their connections stop.
    func dropSegments() {
        stopFetches()
        own.segment = nil
        segments = nil
        record.segments = nil
    }

    // MARK: bytes

    /// The map of the bytes handed to the kernel (buffered ones left out): what the journal says.
    var committedMap: SegmentMap? { segments?.committedMap }

    /// Bytes written to the partial file over all segments.
    var segmentedBytes: Int64? { committedMap?.bytesWritten }

    /// A sink of a segment handed bytes to the kernel: the row says so at once (in this loop turn's
    /// transaction), so that a killed process re-fetches at most a buffer per connection.
    func segmentBytesWritten() {
        guard let map = committedMap else { return }
        record.segments = map.encoded
        record.bytesCommitted = map.bytesWritten
        writeRow()
    }

    /// The transfer's own request takes `bytes` for its segment: the bytes that fit in it, and
    /// whether the segment is whole with bytes left over (the rest of the answer is not wanted).
    func clipToOwnSegment(_ bytes: UnsafeRawBufferPointer) -> (UnsafeRawBufferPointer, cut: Bool) {
        guard let room = segments?.room(for: own), Int64(bytes.count) > room else { return (bytes, false) }
        return (UnsafeRawBufferPointer(rebasing: bytes[0..<Int(room)]), true)
    }
}
