import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// The pure segment map segmented downloads are to be built on (issue 19, items 1 and 3).
@Suite("Segment map")
struct SegmentMapTests {
    let mib: Int64 = 1024 * 1024

    @Test("a plan splits what is left evenly, never below the minimum, the first keeping its bytes")
    func plans() {
        let four = SegmentMap.plan(total: 100 * mib, connections: 4, minimumSize: 4 * mib)
        #expect(four.segments.map(\.start) == [0, 25 * mib, 50 * mib, 75 * mib])
        #expect(four.segments.last?.end == 100 * mib && four.isValid)
        // A small file gets fewer connections: none smaller than the minimum.
        let small = SegmentMap.plan(total: 10 * mib, connections: 8, minimumSize: 4 * mib)
        #expect(small.segments.count == 2 && small.isValid)
        #expect(SegmentMap.plan(total: 5 * mib, connections: 8, minimumSize: 4 * mib).segments.count == 1)
        // The first connection already wrote 10 MiB: the rest is shared out after them.
        let started = SegmentMap.plan(total: 100 * mib, connections: 3, minimumSize: mib, written: 10 * mib)
        #expect(started.segments.map(\.start) == [0, 40 * mib, 70 * mib])
        #expect(started.segments[0].written == 10 * mib && started.bytesWritten == 10 * mib)
        #expect(started.segments.map(\.remaining) == [30 * mib, 30 * mib, 30 * mib])
    }

    @Test("a freed connection takes the second half of the largest remainder, down to twice the minimum")
    func dynamicSplit() {
        var map = SegmentMap.plan(total: 64 * mib, connections: 2, minimumSize: 4 * mib)
        map.wrote(32 * mib, in: 0)  // the first is done; the second has written 8 MiB
        map.wrote(8 * mib, in: 1)
        #expect(map.segments[0].isDone)
        let new = map.splitLargest(minimumSize: 4 * mib)
        #expect(new == 2)
        #expect(map.segments[1].end == 52 * mib && map.segments[2].start == 52 * mib && map.segments[2].end == 64 * mib)
        #expect(map.isValid && map.bytesWritten == 40 * mib)
        // Splits go on while a remainder is at least twice the minimum.
        var splits = 0
        while map.splitLargest(minimumSize: 4 * mib) != nil { splits += 1 }
        #expect(map.segments.allSatisfy { $0.remaining >= 4 * mib || $0.isDone })
        #expect(splits > 0 && map.isValid)
    }

    @Test("the journal's form round-trips, and a damaged or foreign one is refused")
    func encoding() {
        var map = SegmentMap.plan(total: 10_000, connections: 3, minimumSize: 1000)
        map.wrote(1234, in: 1)
        map.synced(upTo: 1000, in: 1)
        #expect(SegmentMap(encoded: map.encoded, total: 10_000) == map)
        #expect(map.encoded == "0-3333:0:0;3333-6666:1234:1000;6666-10000:0:0")
        for bad in [
            "", "0-5000:0:0", "0-5000:0:0;5001-10000:0:0", "0-5000:6000:0;5000-10000:0:0",
            "0-5000:10:20;5000-10000:0:0", "x",
        ] {
            #expect(SegmentMap(encoded: bad, total: 10_000) == nil, "\(bad)")
        }
    }

    @Test("after a reboot each segment keeps only its synced bytes; progress is their sum")
    func reboot() {
        var map = SegmentMap.plan(total: 40 * mib, connections: 4, minimumSize: mib)
        for index in 0..<4 {
            map.wrote(Int64(index + 1) * mib, in: index)
            map.synced(upTo: Int64(index) * mib, in: index)
        }
        #expect(map.bytesWritten == 10 * mib && map.bytesSynced == 6 * mib)
        map.cutBackToSynced()
        #expect(map.bytesWritten == 6 * mib && map.isValid)
        #expect(map.segments.map(\.next) == [0, 11 * mib, 22 * mib, 33 * mib])
    }

    @Test("segments are found by their start; the first one nobody fetches; syncs and buffered bytes per segment")
    func lookupsAndSnapshots() {
        let mib: Int64 = 1024 * 1024
        var map = SegmentMap.plan(total: 40 * mib, connections: 4, minimumSize: mib)
        #expect(map.segments.map(\.start) == [0, 10 * mib, 20 * mib, 30 * mib])
        #expect(map.index(startingAt: 20 * mib) == 2)
        #expect(map.index(startingAt: 5) == nil)
        #expect(map.firstUnowned([0, 10 * mib]) == 2)
        map.wrote(10 * mib, in: 2)  // whole: not unowned work any more
        #expect(map.firstUnowned([0, 10 * mib]) == 3)
        map.wrote(3 * mib, in: 0)
        let snapshot = map
        map.wrote(2 * mib, in: 0)
        _ = map.splitLargest(minimumSize: mib)  // splits segment 1 (10 MiB left): a new one at 15 MiB
        map.markSynced(from: snapshot)
        #expect(map.segments[0].synced == 3 * mib && map.segments[0].written == 5 * mib)
        #expect(map.segments[3].synced == 10 * mib)  // the whole one
        #expect(map.segments.map(\.start) == [0, 10 * mib, 15 * mib, 20 * mib, 30 * mib])
        // What the journal may say: buffered bytes left out, synced never above written.
        let committed = map.withoutPending([0: 3 * mib, 15 * mib: 7])
        #expect(committed.segments[0].written == 2 * mib && committed.segments[0].synced == 2 * mib)
        #expect(committed.segments[2].written == 0)
        #expect(committed.isValid)
    }

    @Test("random writes, syncs and splits keep the map valid and never count a byte twice (5,000 runs)")
    func randomized() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let total = Int64.random(in: 1...10_000_000, using: &generator)
            let minimum = Int64.random(in: 1...1_000_000, using: &generator)
            var map = SegmentMap.plan(
                total: total,
                connections: Int.random(in: 1...16, using: &generator),
                minimumSize: minimum,
                written: Int64.random(in: 0...total, using: &generator)
            )
            for _ in 0..<20 {
                let index = Int.random(in: map.segments.indices, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: map.wrote(Int64.random(in: 0...total, using: &generator), in: index)
                case 1: map.synced(upTo: Int64.random(in: 0...total, using: &generator), in: index)
                default: _ = map.splitLargest(minimumSize: minimum)
                }
                #expect(map.isValid, "\(map.encoded) of \(total)")
                #expect(map.bytesWritten <= total && map.bytesSynced <= map.bytesWritten)
            }
            #expect(SegmentMap(encoded: map.encoded, total: total) == map)
        }
    }
}
