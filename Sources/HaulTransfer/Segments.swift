import CHaul
import Dispatch
import FoundationEssentials
import Glibc
import HaulValues

/// A download fetched over several connections (``DownloadManager/Configuration/connectionsPerFile``):
/// its ``SegmentMap``, the connections beyond the transfer's own request, and where they go. Made
/// only for such a download, when an answer shows that its server honours ranges for a file of known
/// length and strong validator (``Transfer/planSegments(total:)``), or when a resumed download's row
/// holds a map. Loop thread only.
final class Segments {
    var map: SegmentMap
    /// How many connections the download may use at once: fewer after one of them failed while
    /// others went on (a server that refuses more connections than it allows per client).
    var connections: Int
    /// No segment is made smaller than this.
    let minimumSize: Int64
    /// The connections beyond the transfer's own request.
    var fetches: [SegmentFetch] = []
    /// The start of the segment the transfer's own request writes, while it writes one.
    var primaryStart: Int64? {
        didSet { if primaryStart != nil { primarySince = (DispatchTime.now().uptimeNanoseconds, primaryWritten) } }
    }
    /// When the transfer's own request began on its segment, and the segment's bytes then.
    var primarySince: (at: UInt64, written: Int64) = (0, 0)
    private var primaryWritten: Int64 {
        primaryStart.flatMap { map.index(startingAt: $0) }.map { map.segments[$0].written } ?? 0
    }
    /// Where the other connections send their requests: the URL whose answer was accepted (after
    /// redirects), with the download's headers only when it is the download's origin.
    var target: URL
    var sendsHeaders: Bool

    init(map: SegmentMap, connections: Int, minimumSize: Int64, target: URL, sendsHeaders: Bool) {
        self.map = map
        self.connections = connections
        self.minimumSize = minimumSize
        self.target = target
        self.sendsHeaders = sendsHeaders
    }

    /// The segments a connection fetches now.
    var owned: Set<Int64> {
        var starts = Set(fetches.map(\.start))
        if let primaryStart { starts.insert(primaryStart) }
        return starts
    }

    /// The segment the next connection fetches: one nobody fetches, else the second half of the
    /// largest one left (aria2's dynamic split) whose connection would take more than a second to
    /// finish it alone; `nil` when no piece is worth a connection.
    func nextSegment(now: UInt64) -> Int? {
        if let index = map.firstUnowned(owned) { return index }
        return map.splitLargest(minimumSize: minimumSize) { worthSplitting($0, now: now) }
    }

    /// Whether a new connection would find a segment to fetch (without splitting one yet).
    func hasWorkForAnotherConnection(now: UInt64) -> Bool {
        if map.firstUnowned(owned) != nil { return true }
        return map.segments.contains { $0.remaining >= 2 * max(1, minimumSize) && worthSplitting($0, now: now) }
    }

    /// The time a connection has had for its segment before its speed tells whether to split it.
    static let measuredAfter: UInt64 = 200_000_000  // nanoseconds
    /// A segment its connection finishes within this time is left to it: a split would cut that
    /// connection while bytes it was sent are still in flight (a fast server's socket buffers hold
    /// megabytes), and a new connection costs a handshake.
    static let worthASplit: Double = 1  // seconds

    /// Whether `segment`'s connection would take more than ``worthASplit`` to fetch the rest alone,
    /// at the speed it has had since its request went out.
    private func worthSplitting(_ segment: SegmentMap.Segment, now: UInt64) -> Bool {
        let since: (at: UInt64, written: Int64)
        if segment.start == primaryStart {
            since = primarySince
        } else if let fetch = fetches.first(where: { $0.start == segment.start }) {
            since = (fetch.requestedAt, fetch.writtenAtRequest)
        } else {
            return true
        }
        let elapsed = now &- since.at
        guard elapsed >= Self.measuredAfter else { return false }
        let speed = Double(segment.written - since.written) / (Double(elapsed) / 1e9)
        return Double(segment.remaining) > speed * Self.worthASplit
    }
}
