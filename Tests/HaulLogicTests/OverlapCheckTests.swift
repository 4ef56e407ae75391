import Testing

@testable import HaulTestSupport
@testable import HaulTransfer
@testable import HaulValues

/// What an answer must repeat before its new bytes count (``OverlapCheck``): bytes read past, each
/// compared with the partial's at its place, then the partial's last bytes; the decision goes to
/// the machine only once all of them matched, wherever the answer's chunks are cut.
@Suite("Overlap check")
struct OverlapCheckTests {
    /// The partial's bytes: what `holds` compares the bytes read past with.
    let partial: [UInt8] = (0..<64).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
    let decision = ResponseDecision.append(total: 100)

    /// Feeds `answer` in chunks of the given sizes (the last one takes the rest); returns the steps
    /// that were not ``OverlapCheck/Step/more``, the bytes compared, and the check afterwards.
    private func feed(
        _ check: OverlapCheck,
        _ answer: [UInt8],
        cuts: [Int]
    ) -> (steps: [OverlapCheck.Step], compared: Int, calls: Int, check: OverlapCheck) {
        var check = check
        var steps: [OverlapCheck.Step] = []
        var compared = 0
        var calls = 0
        var start = 0
        var sizes = cuts
        sizes.append(answer.count)
        for size in sizes where start <= answer.count {
            let end = min(answer.count, start + size)
            let (step, count) = answer[start..<end].withUnsafeBytes { chunk in
                check.take(chunk) { (bytes: UnsafeRawBufferPointer, offset: Int64) -> Bool in
                    calls += 1
                    let held = partial[Int(offset)..<min(partial.count, Int(offset) + bytes.count)]
                    return held.count == bytes.count && held.elementsEqual(bytes)
                }
            }
            compared += count
            if step != .more {
                steps.append(step)
                break
            }
            start = end
            if end == answer.count { break }
        }
        return (steps, compared, calls, check)
    }

    @Test("bytes read past that match: the decision, and the new bytes after them, whatever the chunking")
    func readPastMatches() {
        let check = OverlapCheck(decision: decision, readingPast: 40)
        let answer = Array(partial[..<40]) + [1, 2, 3]
        for cut in [1, 7, 39, 40, 41, 43] {
            let (steps, compared, _, after) = feed(check, answer, cuts: Array(repeating: cut, count: 64))
            #expect(compared == 40)
            #expect(after.readPast == 40 && after.readingPast == 0)
            guard case .matched(let fed, let at)? = steps.first else {
                Issue.record("chunks of \(cut): no decision, \(steps)")
                continue
            }
            #expect(fed == decision)
            // The new bytes start in the chunk where the 40th byte ends.
            #expect(at == (40 % cut == 0 ? cut : 40 % cut), "chunks of \(cut)")
        }
    }

    @Test("a byte read past that differs ends the check at its chunk; nothing after it is compared")
    func readPastDiffers() {
        var answer = Array(partial[..<40])
        answer[25] ^= 0xFF
        let (steps, compared, _, _) = feed(
            OverlapCheck(decision: decision, readingPast: 40),
            answer,
            cuts: [10, 10, 10]
        )
        #expect(steps == [.differs])
        #expect(compared == 20)  // the first two chunks matched; the third holds the changed byte
    }

    @Test("the overlap after the bytes read past: both must match, in order")
    func readPastThenOverlap() {
        let overlap = Array(partial[40..<48])
        let check = OverlapCheck(decision: decision, readingPast: 40, overlap: overlap)
        #expect(check.repeated == 48)
        let answer = Array(partial[..<48]) + [9, 9]
        for cut in 1...50 {
            let (steps, compared, _, after) = feed(check, answer, cuts: Array(repeating: cut, count: 64))
            #expect(compared == 48, "chunks of \(cut)")
            #expect(after.overlapMatched == 8)
            guard case .matched(_, let at)? = steps.first else {
                Issue.record("chunks of \(cut): \(steps)")
                continue
            }
            // Where byte 48 is within its chunk.
            #expect(at == (48 % cut == 0 ? cut : 48 % cut), "chunks of \(cut)")
        }
        var changed = answer
        changed[44] ^= 1
        #expect(feed(check, changed, cuts: [45]).steps == [.differs])
    }

    @Test("an overlap alone (an unvalidated resume): compared byte for byte, `holds` never asked")
    func overlapAlone() {
        let overlap: [UInt8] = [5, 6, 7, 8]
        let check = OverlapCheck(decision: decision, overlap: overlap)
        let (steps, compared, calls, _) = feed(check, [5, 6, 7, 8, 1], cuts: [1, 1, 1])
        #expect(steps == [.matched(decision, newBytesAt: 1)])
        #expect(compared == 4 && calls == 0)
        #expect(feed(check, [5, 6, 0, 8], cuts: [2]).steps == [.differs])
        // An empty overlap is proven at once.
        #expect(
            feed(OverlapCheck(decision: decision, overlap: []), [1], cuts: []).steps == [
                .matched(decision, newBytesAt: 0)
            ]
        )
    }

    @Test("empty chunks change nothing; an answer that stops inside the stretch leaves the check waiting")
    func emptyAndShort() {
        var check = OverlapCheck(decision: decision, readingPast: 10, overlap: [1])
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        let (step, count) = check.take(empty) { _, _ in
            Issue.record("compared nothing"); return false
        }
        #expect(step == .more && count == 0)
        let (steps, compared, _, after) = feed(check, Array(partial[..<6]), cuts: [3])
        #expect(steps.isEmpty && compared == 6)
        #expect(after.readingPast == 4 && after.readPast == 6)
    }

    @Test("a failure to read the partial back is the caller's to report")
    func holdsFails() {
        struct Unreadable: Error {}
        var check = OverlapCheck(decision: decision, readingPast: 4)
        let answer: [UInt8] = [1, 2, 3, 4]
        #expect(throws: Unreadable.self) {
            try answer.withUnsafeBytes { chunk in
                _ = try check.take(chunk) { (_, _) throws(Unreadable) -> Bool in throw Unreadable() }
            }
        }
    }

    @Test("the whole file to a range it ignored: read past, then the decision to ask again")
    func askAgainAfterReadingPast() {
        let askAgain = ResponseDecision.askAgain(.date)
        let check = OverlapCheck(decision: askAgain, readingPast: 16)
        let (steps, _, _, _) = feed(check, Array(partial[..<20]), cuts: [5, 5, 5])
        #expect(steps == [.matched(askAgain, newBytesAt: 1)])
    }

    @Test("random answers cut at random: the check says what a comparison of the whole says", arguments: 1...4)
    func randomChunkings(seed: Int) {
        var random = SeededRandom(seed: UInt64(seed))
        for _ in 0..<500 {
            let readingPast = Int.random(in: 0...40, using: &random)
            let overlapLength = Int.random(in: 0...8, using: &random)
            let overlapStart = Int.random(in: 0...(partial.count - overlapLength), using: &random)
            let overlap =
                Bool.random(using: &random) ? Array(partial[overlapStart..<(overlapStart + overlapLength)]) : nil
            let expected = Array(partial[..<readingPast]) + (overlap ?? [])
            var answer =
                expected
                + (0..<Int.random(in: 0...20, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            if !expected.isEmpty, Int.random(in: 0..<3, using: &random) == 0 {
                answer[Int.random(in: 0..<expected.count, using: &random)] &+= 1  // one repeated byte changed
            }
            let cuts = (0..<8).map { _ in Int.random(in: 1...12, using: &random) }
            let check = OverlapCheck(decision: decision, readingPast: Int64(readingPast), overlap: overlap)
            let (steps, compared, _, _) = feed(check, answer, cuts: cuts)
            let same = answer.count >= expected.count && Array(answer[..<expected.count]) == expected
            if same {
                #expect(
                    compared == expected.count && steps.count == 1,
                    "\(readingPast) + \(overlapLength), cuts \(cuts)"
                )
                if case .matched(_, let at)? = steps.first {
                    // The new bytes start where the repeated ones end, in the chunk that holds the end.
                    var end = 0
                    for cut in cuts {
                        guard end + cut < expected.count else { break }
                        end += cut
                    }
                    #expect(at == expected.count - end || (expected.isEmpty && at == 0), "cuts \(cuts)")
                } else {
                    Issue.record("no decision: \(steps)")
                }
            } else {
                #expect(steps == [.differs], "\(readingPast) + \(overlapLength), cuts \(cuts)")
            }
        }
    }
}
