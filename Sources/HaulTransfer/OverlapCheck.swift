import Glibc
import HaulValues

/// What an answer must repeat of the bytes a download holds before its new bytes count, and the
/// decision on the answer that waits on it: first the bytes of an answer from byte 0 that the
/// download has (read past, each compared with the one held at its place), then the partial's last
/// bytes (an unvalidated resume's overlap, or one a URL moved to must prove). Once every repeated
/// byte matched, the decision goes to the machine; a byte that differs means another version,
/// whatever the validators say, and the download starts over.
///
/// Pure: the bytes held at a place in the partial are compared by the caller's `holds` (a file's
/// bytes are read back from disk, a stream's from its tail), so any chunking of an answer is
/// table-tested without I/O (`OverlapCheckTests`).
struct OverlapCheck: Equatable {
    /// The decision fed to the machine once every repeated byte matched.
    let decision: ResponseDecision
    /// Bytes of an answer from byte 0 still to read past, and how many were: where its next byte
    /// is in the file.
    private(set) var readingPast: Int64
    private(set) var readPast: Int64 = 0
    /// The partial's last bytes, which the answer repeats after the ones read past, and how many of
    /// them it repeated so far.
    private let overlap: [UInt8]?
    private(set) var overlapMatched = 0

    init(decision: ResponseDecision, readingPast: Int64 = 0, overlap: [UInt8]? = nil) {
        self.decision = decision
        self.readingPast = max(0, readingPast)
        self.overlap = overlap
    }

    /// Bytes the answer repeats in all (read past, then the overlap).
    var repeated: Int64 { readingPast + readPast + Int64(overlap?.count ?? 0) }

    /// Where a chunk leaves the check.
    enum Step: Equatable {
        /// All of the chunk was compared and matched; more is to come.
        case more
        /// Every repeated byte matched: the decision goes to the machine, and the chunk's bytes from
        /// `newBytesAt` on are the answer's first new ones.
        case matched(ResponseDecision, newBytesAt: Int)
        /// A byte differs from the one held: another version, or another file.
        case differs
    }

    /// Compares the next `chunk` of the answer: the part read past with `holds(bytes, offset)` (the
    /// partial's bytes at that offset), the overlap with the bytes kept. `compared`: how many of the
    /// chunk's bytes matched (they came again: counted as resent). Once the step is not ``Step/more``,
    /// the check is over.
    mutating func take<Failure: Error>(
        _ chunk: UnsafeRawBufferPointer,
        holds: (UnsafeRawBufferPointer, Int64) throws(Failure) -> Bool
    ) throws(Failure) -> (step: Step, compared: Int) {
        var at = 0
        if readingPast > 0 {
            let count = Int(min(Int64(chunk.count), readingPast))
            if count > 0, !(try holds(UnsafeRawBufferPointer(rebasing: chunk[..<count]), readPast)) {
                return (.differs, 0)
            }
            readingPast -= Int64(count)
            readPast += Int64(count)
            at = count
            guard readingPast == 0 else { return (.more, at) }
        }
        if let overlap {
            let count = min(chunk.count - at, overlap.count - overlapMatched)
            let matches = overlap.withUnsafeBytes { kept in
                count == 0 || memcmp(kept.baseAddress! + overlapMatched, chunk.baseAddress! + at, count) == 0
            }
            guard matches else { return (.differs, at) }
            overlapMatched += count
            at += count
            guard overlapMatched == overlap.count else { return (.more, at) }
        }
        return (.matched(decision, newBytesAt: at), at)
    }
}
