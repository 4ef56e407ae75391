/// A histogram of non-negative integer values (nanoseconds, bytes per second) in constant memory
/// whatever the count, as HdrHistogram keeps one: values below 128 each have a bucket of their own;
/// above, each power of two is cut into 128 buckets of equal width, so that a bucket's middle is
/// within 1/256 (0.4 %) of any value in it. A percentile is read from the counts, never from the
/// values, which are not kept. At most 7,424 buckets (58 KiB), made as the values reach them.
/// The ones ``LoadReport`` keeps per second of a run are coarser (8 buckets per power of two, within
/// 6.25 %), so that a long run's seconds stay small.
public struct PercentileHistogram: Sendable, Hashable {
    /// Buckets per power of two, and the exact values below the first: 2^7 by default.
    static let defaultSubBits = 7
    private let subBits: UInt8

    /// How many values fell in each bucket, up to the highest bucket reached.
    private var counts: [UInt64] = []
    /// How many values were recorded.
    public private(set) var count = 0
    /// The smallest value recorded (0 when none was).
    public private(set) var min: UInt64 = 0
    /// The largest value recorded (0 when none was).
    public private(set) var max: UInt64 = 0
    /// The sum of the values, for the mean (a Double: 2^53 ns are 104 days).
    private var sum: Double = 0

    /// An empty histogram, each value within 0.4 % of its bucket's middle.
    public init() { subBits = UInt8(Self.defaultSubBits) }

    /// An empty histogram with 2^`subBits` buckets per power of two (1 to 7): a bucket's middle is
    /// within 2^-(`subBits`+1) of any value in it (3 gives 6 %, and 496 buckets at most).
    package init(subBits: Int) { self.subBits = UInt8(Swift.min(Self.defaultSubBits, Swift.max(1, subBits))) }

    /// The mean of the values recorded (0 when none was).
    public var mean: Double { count == 0 ? 0 : sum / Double(count) }

    /// Records `value`.
    public mutating func record(_ value: UInt64) {
        let index = Self.bucket(of: value, subBits: Int(subBits))
        if index >= counts.count { counts.append(contentsOf: repeatElement(0, count: index + 1 - counts.count)) }
        counts[index] += 1
        if count == 0 {
            (min, max) = (value, value)
        } else {
            min = Swift.min(min, value)
            max = Swift.max(max, value)
        }
        count += 1
        sum += Double(value)
    }

    /// Adds every value `other` recorded.
    /// `other` must have the same precision as this one: one that has not is not merged.
    public mutating func merge(_ other: PercentileHistogram) {
        guard other.count > 0, other.subBits == subBits else { return }
        if other.counts.count > counts.count {
            counts.append(contentsOf: repeatElement(0, count: other.counts.count - counts.count))
        }
        for (index, value) in other.counts.enumerated() { counts[index] += value }
        (min, max) = count == 0 ? (other.min, other.max) : (Swift.min(min, other.min), Swift.max(max, other.max))
        count += other.count
        sum += other.sum
    }

    /// The value below which `percentile` percent of the values fall (the nearest rank: the value of
    /// rank ⌈p × count / 100⌉), within 0.4 % of the recorded one; 0 for an empty histogram. 0 gives the
    /// smallest value, 100 the largest, both exact.
    public func value(atPercentile percentile: Double) -> UInt64 {
        guard count > 0 else { return 0 }
        let rank = Swift.max(1, Swift.min(count, Int((percentile / 100 * Double(count)).rounded(.up))))
        if rank == count { return max }
        if percentile <= 0 { return min }
        var seen: UInt64 = 0
        for (index, bucketCount) in counts.enumerated() where bucketCount > 0 {
            seen += bucketCount
            if seen >= UInt64(rank) {
                return Swift.min(max, Swift.max(min, Self.middle(of: index, subBits: Int(subBits))))
            }
        }
        return max
    }

    /// How many values are at most `value` (those of `value`'s own bucket counted whole: within its
    /// width, 0.8 %, of the exact count's boundary).
    public func countAtOrBelow(_ value: UInt64) -> Int {
        guard count > 0 else { return 0 }
        let last = Swift.min(counts.count - 1, Self.bucket(of: value, subBits: Int(subBits)))
        return Int(counts[...last].reduce(0, +))
    }

    /// The bucket `value` falls in, with 2^`subBits` buckets per power of two.
    static func bucket(of value: UInt64, subBits: Int = defaultSubBits) -> Int {
        let subCount = 1 << subBits
        guard value >= UInt64(subCount) else { return Int(value) }
        let exponent = UInt64.bitWidth - 1 - value.leadingZeroBitCount  // ≥ subBits
        let shift = exponent - subBits
        let sub = Int(value >> UInt64(shift)) - subCount  // 0..<subCount
        return subCount + shift * subCount + sub
    }

    /// The smallest value of bucket `index`, and its width.
    static func range(of index: Int, subBits: Int = defaultSubBits) -> (lowest: UInt64, width: UInt64) {
        let subCount = 1 << subBits
        guard index >= subCount else { return (UInt64(index), 1) }
        let shift = (index - subCount) / subCount
        let sub = (index - subCount) % subCount
        return (UInt64(subCount + sub) << UInt64(shift), 1 << UInt64(shift))
    }

    /// The value a bucket stands for: its middle.
    static func middle(of index: Int, subBits: Int = defaultSubBits) -> UInt64 {
        let (lowest, width) = range(of: index, subBits: subBits)
        return lowest + (width - 1) / 2
    }
}
