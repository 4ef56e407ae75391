import CHaul
import FoundationEssentials
import Glibc

/// An expected digest of a whole file, as the layers below check it (the facade's public
/// `Checksum` says what each field means).
package struct Checksum: Sendable, Hashable, CustomStringConvertible {
    /// A digest algorithm.
    package enum Algorithm: String, Sendable, Hashable, CaseIterable {
        case sha256
        case sha1
        case md5

        /// Hexadecimal digits in a digest.
        package var hexLength: Int {
            switch self {
            case .sha256: 64
            case .sha1: 40
            case .md5: 32
            }
        }
    }

    /// The algorithm.
    package let algorithm: Algorithm
    /// The digest, in lowercase hexadecimal.
    package let hex: String

    /// A checksum, or `nil` when `hex` is not a digest of `algorithm` (wrong length or not hexadecimal).
    package init?(algorithm: Algorithm, hex: String) {
        let lowered = hex.lowercased()
        guard lowered.utf8.count == algorithm.hexLength,
            lowered.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
        else { return nil }
        self.algorithm = algorithm
        self.hex = lowered
    }

    /// Parses `ALGORITHM:HEX`, as in `sha256:9f86…` (the form ``description`` prints), or `nil`.
    package init?(_ text: String) {
        let parts = text.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let algorithm = Algorithm(rawValue: parts[0].lowercased()) else { return nil }
        self.init(algorithm: algorithm, hex: parts[1].trimmingWhitespace)
    }

    /// `ALGORITHM:HEX`.
    package var description: String { "\(algorithm.rawValue):\(hex)" }

    /// The digest of the file at `path`, in lowercase hexadecimal: a user's file, which may be
    /// reached through a link but must be a regular file (a FIFO would block the read).
    package static func digest(ofFileAt path: String, algorithm: Algorithm) throws(DownloadError) -> String {
        try digest(of: open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC), at: path, algorithm: algorithm)
    }

    /// The digest of the file open at `descriptor` (-1 with `errno`: it could not be opened), which
    /// this closes; `path` names it in errors. A file of a state directory is opened by
    /// `PrivateFile` and handed here.
    package static func digest(of descriptor: Int32, at path: String, algorithm: Algorithm) throws(DownloadError)
        -> String
    {
        var status = stat()
        if descriptor >= 0, fstat(descriptor, &status) == 0, status.st_mode & S_IFMT != S_IFREG {
            close(descriptor)
            throw DownloadError(
                code: .unsupportedDestination,
                url: nil,
                path: path,
                detail: "\(FilePath.kind(of: status.st_mode)), whose checksum cannot be read"
            )
        }
        guard descriptor >= 0 else {
            throw DownloadError(
                code: .fileSystem,
                url: nil,
                errno: errno,
                path: path,
                detail: "open for the checksum failed"
            )
        }
        defer { close(descriptor) }
        guard let context = EVP_MD_CTX_new() else {
            throw DownloadError(code: .internalError, url: nil, detail: "EVP_MD_CTX_new failed")
        }
        defer { EVP_MD_CTX_free(context) }
        let digest: OpaquePointer? =
            switch algorithm {
            case .sha256: EVP_sha256()
            case .sha1: EVP_sha1()
            case .md5: EVP_md5()
            }
        guard EVP_DigestInit_ex(context, digest, nil) == 1 else {
            throw DownloadError(code: .internalError, url: nil, detail: "\(algorithm.rawValue) is not available")
        }
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = read(descriptor, buffer, chunk)
            if count < 0 {
                if errno == EINTR { continue }
                throw DownloadError(
                    code: .fileSystem,
                    url: nil,
                    errno: errno,
                    path: path,
                    detail: "read for the checksum failed"
                )
            }
            if count == 0 { break }
            EVP_DigestUpdate(context, buffer, count)
        }
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &output, &length)
        return Hexadecimal.lowercase(output.prefix(Int(length)))
    }
}
