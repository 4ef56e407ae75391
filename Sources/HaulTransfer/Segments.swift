import CHaul
import Dispatch
import FoundationEssentials
import Glibc
import HaulIO
import HaulValues

/// A download fetched over several connections (``DownloadManager/Configuration/connectionsPerFile``),
/// as aria2's `SegmentMan` is apart from its `RequestGroup`: the ``SegmentMap``, which connection
/// fetches which segment, the segment each connection takes next (aria2's dynamic split), the bytes
/// the journal may say are written, and what a connection's answer to its range is. The transfer
/// owns it and does the requests (``Transfer+Connections``); this type does the bookkeeping. Made
/// only for such a download, when an answer shows that its server honours ranges for a file of
/// known length and strong validator (``plan(total:written:connections:minimumSize:own:target:sendsHeaders:)``),
/// or when a resumed download's row holds a map (``init(restoring:total:connections:minimumSize:own:target:)``).
/// Loop thread only.
final class Segments {
    private(set) var map: SegmentMap
    /// How many connections the download may use at once: fewer after one of them failed while
    /// others went on (a server that refuses more connections than it allows per client).
    var allowed: Int
    /// No segment is made smaller than this.
    let minimumSize: Int64
    /// The transfer's own request: it fetches a segment too, while ``Connection/segment`` says so.
    unowned let own: Connection
    /// The connections beyond the transfer's own request.
    private(set) var others: [Connection] = []
    /// Where the other connections send their requests: the URL whose answer was accepted (after
    /// redirects), with the download's headers only when it is the download's origin.
    var target: URL
    var sendsHeaders: Bool

    private init(map: SegmentMap, allowed: Int, minimumSize: Int64, own: Connection, target: URL, sendsHeaders: Bool) {
        self.map = map
        self.allowed = allowed
        self.minimumSize = minimumSize
        self.own = own
        self.target = target
        self.sendsHeaders = sendsHeaders
    }

    /// The plan for the `total` bytes of a file of which the first `written` are in the partial, over
    /// at most `connections`: the transfer's own request keeps fetching the first segment. `nil`
    /// when the file does not split (one segment).
    static func plan(
        total: Int64,
        written: Int64,
        connections: Int,
        minimumSize: Int64,
        own: Connection,
        target: URL,
        sendsHeaders: Bool
    ) -> Segments? {
        let map = SegmentMap.plan(total: total, connections: connections, minimumSize: minimumSize, written: written)
        guard map.segments.count > 1 else { return nil }
        let made = Segments(
            map: map,
            allowed: connections,
            minimumSize: minimumSize,
            own: own,
            target: target,
            sendsHeaders: sendsHeaders
        )
        own.take(map.segments[0])
        return made
    }

    /// The segments a resumed download's row holds (`encoded`, ``SegmentMap/encoded``), for a file
    /// of `total` bytes at `target`; `nil` when the text is not a map of it.
    init?(restoring encoded: String, total: Int64, connections: Int, minimumSize: Int64, own: Connection, target: URL) {
        guard let map = SegmentMap(encoded: encoded, total: total) else { return nil }
        (self.map, self.allowed, self.minimumSize) = (map, max(1, connections), minimumSize)
        (self.own, self.target, self.sendsHeaders) = (own, target, true)
    }

    // MARK: who fetches what

    /// The connections fetching a segment now: the transfer's own request, when it does, and the others.
    var fetching: [Connection] { own.segment == nil ? others : [own] + others }

    /// The segments a connection fetches now.
    private var owned: Set<Int64> { Set(fetching.compactMap(\.segment)) }

    /// The segment the next connection fetches: one nobody fetches, else the second half of the
    /// largest one left (aria2's dynamic split) whose connection would take more than a second to
    /// finish it alone; `nil` when no piece is worth a connection.
    func nextSegment(now: UInt64) -> SegmentMap.Segment? {
        let index =
            map.firstUnowned(owned) ?? map.splitLargest(minimumSize: minimumSize) { worthSplitting($0, now: now) }
        return index.map { map.segments[$0] }
    }

    /// Whether a new connection would find a segment to fetch (without splitting one yet).
    func hasWorkForAnotherConnection(now: UInt64) -> Bool {
        if map.firstUnowned(owned) != nil { return true }
        return map.segments.contains { $0.remaining >= 2 * max(1, minimumSize) && worthSplitting($0, now: now) }
    }

    /// The first segment nobody fetches, which the transfer's own request takes at the start of an
    /// attempt; `nil` when every segment is whole or taken.
    func ownTakesFirstLeft() -> SegmentMap.Segment? {
        own.segment = nil
        guard let index = map.firstUnowned(owned) else { return nil }
        own.take(map.segments[index])
        return map.segments[index]
    }

    /// The time a connection has had for its segment before its speed tells whether to split it.
    static let measuredAfter: UInt64 = 200_000_000  // nanoseconds
    /// A segment its connection finishes within this time is left to it: a split would cut that
    /// connection while bytes it was sent are still in flight (a fast server's socket buffers hold
    /// megabytes), and a new connection costs a handshake.
    static let worthASplit: Double = 1  // seconds

    /// Whether `segment`'s connection would take more than ``worthASplit`` to fetch the rest alone,
    /// at the speed it has had since it began on it.
    private func worthSplitting(_ segment: SegmentMap.Segment, now: UInt64) -> Bool {
        guard let connection = fetching.first(where: { $0.segment == segment.start }) else { return true }
        let elapsed = now &- connection.since.at
        guard elapsed >= Self.measuredAfter else { return false }
        let speed = Double(segment.written - connection.since.written) / (Double(elapsed) / 1e9)
        return Double(segment.remaining) > speed * Self.worthASplit
    }

    /// A connection beyond the transfer's own request, for `segment`.
    func add(_ connection: Connection, for segment: SegmentMap.Segment) {
        connection.take(segment)
        others.append(connection)
    }

    /// A connection stops fetching.
    func remove(_ connection: Connection) { others.removeAll { $0 === connection } }

    // MARK: bytes

    /// The segment `connection` fetches, as the map holds it now.
    func segment(of connection: Connection) -> SegmentMap.Segment? {
        connection.segment.flatMap { map.index(startingAt: $0) }.map { map.segments[$0] }
    }

    /// How many more bytes `connection`'s segment takes; `nil` when it fetches none.
    func room(for connection: Connection) -> Int64? { segment(of: connection)?.remaining }

    /// `connection` wrote `count` bytes of its segment.
    func wrote(_ count: Int, by connection: Connection) {
        guard let start = connection.segment, let index = map.index(startingAt: start) else { return }
        map.wrote(Int64(count), in: index)
    }

    /// Whether `connection`'s segment is whole (or gone).
    func isWhole(for connection: Connection) -> Bool { segment(of: connection)?.isDone ?? true }

    /// The map of the bytes handed to the kernel (bytes still in a sink's buffer left out): what the
    /// journal says.
    var committedMap: SegmentMap {
        var pending: [Int64: Int64] = [:]
        for connection in fetching {
            guard let start = connection.segment, let sink = connection.sink else { continue }
            pending[start, default: 0] += Int64(sink.bufferedCount)
        }
        return map.withoutPending(pending)
    }

    /// The segments' bytes in `synced` (a map's text, ``SegmentMap/encoded``) are durable.
    func markSynced(_ synced: String) {
        guard let snapshot = SegmentMap(encoded: synced, total: map.total) else { return }
        map.markSynced(from: snapshot)
    }

    // MARK: answers

    /// What an answer to a request for one segment is, from its status, `Content-Range`, length and
    /// how its validator matches the download's pin (segments are planned only for a file with a
    /// strong validator, which every answer is checked against).
    enum Answer: Equatable {
        /// The rest of the segment of the same file: a 206 from the asked byte, of the file's
        /// length, of the pinned version.
        case rest
        /// A success that names no version (an overloaded server's error page as 200): not "the file
        /// changed", a failed request.
        case unproven
        /// Another file than the segment's: another version or length (`.remoteChanged`), other bytes
        /// than the ones asked for (`.rangeMismatch`: nothing this server sends for ranges is
        /// trusted), or the whole file (`.rangeIgnored` when it is the same version).
        case changed(RestartReason)
        /// Another status: decided as any answer is.
        case other
    }

    /// What the answer with `status`, `contentRange` and `contentLength`, whose validator `match`es
    /// the pin so, is to a request for the bytes from `asked` of a file of `total` bytes.
    static func answer(
        status: Int,
        contentRange: String?,
        contentLength: Int64?,
        match: PinnedVersion.Match,
        total: Int64,
        asked: Int64
    ) -> Answer {
        guard (200...299).contains(status) else { return .other }
        if match == .unproven { return .unproven }
        switch status {
        case 206:
            guard case .range(let first, _, let length)? = contentRange.flatMap(ContentRange.init),
                length == total, match == .same
            else { return .changed(.remoteChanged) }
            return first == asked ? .rest : .changed(.rangeMismatch)
        case 200:
            return .changed(match == .same && contentLength == total ? .rangeIgnored : .remoteChanged)
        default:
            return .other
        }
    }

    /// What the answer to another connection's request was found to be (``Connection/verdict``).
    enum Verdict: Equatable {
        /// The rest of its segment: its bytes are written.
        case rest
        /// Another version of the file, or the whole file: the download starts over on it.
        case changed(RestartReason)
        /// The server ignored this form of `If-Range`: the same range again, in the next form.
        case askAgain
        /// Refused with an error (``Connection/error``): this connection failed.
        case refused
    }
}
