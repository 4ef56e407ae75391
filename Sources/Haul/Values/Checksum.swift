import HaulValues

/// An expected digest of a whole file: checked before the file is moved to its destination.
///
/// ```swift
/// let checksum = Checksum("sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
/// ```
public struct Checksum: Sendable, Hashable, CustomStringConvertible {
    /// A digest algorithm.
    public enum Algorithm: String, Sendable, Hashable, CaseIterable {
        case sha256
        case sha1
        case md5

        /// Hexadecimal digits in a digest.
        public var hexLength: Int { engine.hexLength }

        /// The algorithm as the layers below know it.
        var engine: HaulValues.Checksum.Algorithm {
            switch self {
            case .sha256: .sha256
            case .sha1: .sha1
            case .md5: .md5
            }
        }
    }

    /// The algorithm.
    public let algorithm: Algorithm
    /// The digest, in lowercase hexadecimal.
    public let hex: String

    /// A checksum, or `nil` when `hex` is not a digest of `algorithm` (wrong length or not hexadecimal).
    public init?(algorithm: Algorithm, hex: String) {
        guard let checksum = HaulValues.Checksum(algorithm: algorithm.engine, hex: hex) else { return nil }
        self.init(checksum)
    }

    /// Parses `ALGORITHM:HEX`, as in `sha256:9f86…` (the form ``description`` prints), or `nil`.
    public init?(_ text: String) {
        guard let checksum = HaulValues.Checksum(text) else { return nil }
        self.init(checksum)
    }

    /// `ALGORITHM:HEX`.
    public var description: String { "\(algorithm.rawValue):\(hex)" }
}

extension Checksum {
    /// The checksum as the layers below check it.
    init(_ checksum: HaulValues.Checksum) {
        algorithm = Algorithm(rawValue: checksum.algorithm.rawValue)!  // the same names, case for case
        hex = checksum.hex
    }

    /// The digest of the file at `path` by this checksum's algorithm, in lowercase hexadecimal.
    func digest(ofFileAt path: String) throws(HaulValues.DownloadError) -> String {
        try HaulValues.Checksum.digest(ofFileAt: path, algorithm: algorithm.engine)
    }
}
