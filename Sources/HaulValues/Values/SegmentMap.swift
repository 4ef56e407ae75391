/// The pieces of a file fetched over several connections (issue 19): ranges that cover the file
/// from byte 0 to its end, one after another, each with the bytes at its start already in the
/// partial file (`written`) and how many of those are on stable storage (`synced`). Pure: the
/// planning, aria2's dynamic split, the journal's text form and the cut after a reboot are tested
/// without I/O.
///
/// A transfer fetched over several connections keeps one (``Segments``), and its journal row the
/// text form (``JournalRow/segments``). A segment is known by its `start`, which never changes:
/// a split only moves the end of the segment that gives its second half.
package struct SegmentMap: Equatable, Sendable {
    package struct Segment: Equatable, Sendable {
        /// Its first byte, and the byte after its last.
        package var start: Int64
        package var end: Int64
        /// Bytes from `start` in the partial file.
        package var written: Int64 = 0
        /// Of those, bytes on stable storage.
        var synced: Int64 = 0

        /// The next byte to ask for.
        package var next: Int64 { start + written }
        /// Bytes still to fetch.
        package var remaining: Int64 { end - next }
        package var isDone: Bool { written == end - start }
    }

    /// In order of `start`; each ends where the next starts.
    package private(set) var segments: [Segment]
    /// The file's length.
    package let total: Int64

    /// The plan for a file of `total` bytes over at most `connections` connections, none smaller
    /// than `minimumSize` (fewer segments for a small file; one when it is not twice the minimum),
    /// the first holding the `written` bytes the first connection already has.
    package static func plan(total: Int64, connections: Int, minimumSize: Int64, written: Int64 = 0) -> SegmentMap {
        guard total > 0 else { return SegmentMap(segments: [], total: 0) }
        let written = min(max(0, written), total)
        let left = total - written
        let count = Int(max(1, min(Int64(max(1, connections)), left / max(1, minimumSize))))
        var segments: [Segment] = []
        let share = left / Int64(count)
        var start: Int64 = 0
        for index in 0..<count {
            let end = index == count - 1 ? total : written + share * Int64(index + 1)
            segments.append(Segment(start: start, end: end, written: index == 0 ? written : 0))
            start = end
        }
        return SegmentMap(segments: segments, total: total)
    }

    /// The map of a file of `total` bytes with `segments` (checked by ``isValid``).
    init(segments: [Segment], total: Int64) {
        self.segments = segments
        self.total = total
    }

    /// Every byte written so far, over all segments: what progress reports.
    package var bytesWritten: Int64 { segments.reduce(0) { $0 + $1.written } }
    /// Every byte on stable storage.
    package var bytesSynced: Int64 { segments.reduce(0) { $0 + $1.synced } }
    package var isComplete: Bool { segments.allSatisfy(\.isDone) }

    /// Whether the segments cover the file from 0 to `total`, one after another, with bytes written
    /// within each and synced within those.
    var isValid: Bool {
        guard let first = segments.first, first.start == 0, segments.last?.end == total else { return total == 0 }
        for (index, segment) in segments.enumerated() {
            guard segment.start < segment.end, (0...(segment.end - segment.start)).contains(segment.written),
                (0...segment.written).contains(segment.synced)
            else { return false }
            if index > 0, segments[index - 1].end != segment.start { return false }
        }
        return true
    }

    /// `bytes` more were written at the end of segment `index` (never past its end).
    package mutating func wrote(_ bytes: Int64, in index: Int) {
        segments[index].written = min(segments[index].end - segments[index].start, segments[index].written + bytes)
    }

    /// Segment `index`'s bytes up to `written` are on stable storage.
    mutating func synced(upTo written: Int64, in index: Int) {
        segments[index].synced = max(segments[index].synced, min(written, segments[index].written))
    }

    /// aria2's dynamic split, for a connection that finished its segment: the segment with the most
    /// bytes left gives the second half of them to a new segment, which is returned (its index);
    /// `nil` when no segment has at least twice `minimumSize` left, so that no piece is smaller than
    /// the minimum. The segment that gave them stops at the new one's start.
    /// Only segments `worthSplitting` says so of are split (by default, any).
    package mutating func splitLargest(minimumSize: Int64, worthSplitting: (Segment) -> Bool = { _ in true }) -> Int? {
        let candidates = segments.indices.filter {
            segments[$0].remaining >= 2 * max(1, minimumSize) && worthSplitting(segments[$0])
        }
        guard let largest = candidates.max(by: { segments[$0].remaining < segments[$1].remaining }) else {
            return nil
        }
        let middle = segments[largest].next + segments[largest].remaining / 2
        let new = Segment(start: middle, end: segments[largest].end)
        segments[largest].end = middle
        segments.insert(new, at: largest + 1)
        return largest + 1
    }

    /// The index of the segment that starts at `start`, if any (segments are in order of start).
    package func index(startingAt start: Int64) -> Int? {
        var low = 0
        var high = segments.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if segments[middle].start == start { return middle }
            if segments[middle].start < start { low = middle + 1 } else { high = middle - 1 }
        }
        return nil
    }

    /// The first unfinished segment whose start is not in `owned` (no connection fetches it).
    package func firstUnowned(_ owned: Set<Int64>) -> Int? {
        segments.indices.first { !segments[$0].isDone && !owned.contains(segments[$0].start) }
    }

    /// A sync of the file finished that began when the map was `snapshot`: each segment's bytes
    /// written then (and still written) are on stable storage.
    package mutating func markSynced(from snapshot: SegmentMap) {
        for old in snapshot.segments {
            guard let index = index(startingAt: old.start) else { continue }
            segments[index].synced = max(segments[index].synced, min(old.written, segments[index].written))
        }
    }

    /// The same map with `pending` bytes, not yet handed to the kernel, taken off the written
    /// bytes of the segments starting at its keys: what the journal may say is in the file.
    package func withoutPending(_ pending: [Int64: Int64]) -> SegmentMap {
        var map = self
        for (start, bytes) in pending where bytes > 0 {
            guard let index = map.index(startingAt: start) else { continue }
            map.segments[index].written = max(0, map.segments[index].written - bytes)
            map.segments[index].synced = min(map.segments[index].synced, map.segments[index].written)
        }
        return map
    }

    /// After a reboot: each segment keeps only the bytes on stable storage.
    package mutating func cutBackToSynced() {
        for index in segments.indices { segments[index].written = segments[index].synced }
    }

    // MARK: the journal's form

    /// `start-end:written:synced` for each segment, joined by `;`.
    package var encoded: String {
        segments.map { "\($0.start)-\($0.end):\($0.written):\($0.synced)" }.joined(separator: ";")
    }

    /// The map the journal recorded, or `nil` when `text` is not one for a file of `total` bytes.
    package init?(encoded text: String, total: Int64) {
        var segments: [Segment] = []
        for part in text.split(separator: ";") {
            let fields = part.split(separator: ":")
            let range = fields.first?.split(separator: "-") ?? []
            guard fields.count == 3, range.count == 2, let start = Int64(range[0]), let end = Int64(range[1]),
                let written = Int64(fields[1]), let synced = Int64(fields[2])
            else { return nil }
            segments.append(Segment(start: start, end: end, written: written, synced: synced))
        }
        self.init(segments: segments, total: total)
        guard isValid else { return nil }
    }
}
