import CHaul
import Glibc
import HaulValues

/// Reading the partial file back: what a resume compares the server's answer with.
extension FileSink {
    /// The file's bytes from `offset` to its end, buffered ones written first: what an unvalidated
    /// resume compares the server's answer with (``ResumePlan/verify(rangeStart:offset:ifRange:)``).
    package func bytes(from offset: Int64) throws(DownloadError) -> [UInt8] {
        if let stream {
            if let bytes = stream.acceptedBytes(from: offset) { return bytes }
            throw DownloadError(
                code: .streamCannotRestart,
                url: nil,
                path: path,
                detail: "the bytes written to \(stream.kind) before the resume point were not kept, so a resume "
                    + "without a validator cannot be checked"
            )
        }
        try flush()
        let count = Int(max(0, committedLength - offset))
        let file = try PrivateFile.open(path, O_RDONLY)
        guard file >= 0 else {
            throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "open failed")
        }
        defer { Glibc.close(file) }
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { read(file, into: $0, at: offset) }
        guard got == count else {
            let code = got < 0 ? errno : EIO
            throw DownloadError(code: .fileSystem, url: nil, errno: code, path: path, detail: "read failed")
        }
        return bytes
    }

    /// Whether `bytes` are the ones the download holds at `offset`: a partial file's, read back (on
    /// a descriptor of its own, kept until ``endComparing()``); a stream's where its kept tail
    /// reaches (``StreamTarget/holds(_:at:)``). What a resume reads past is compared this way, as it
    /// comes: a server may repeat its validator with other bytes.
    package func holds(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(DownloadError) -> Bool {
        if let stream { return stream.holds(bytes, at: offset) }
        guard offset + Int64(bytes.count) <= receivedLength else { return false }
        try flush()
        if comparing < 0 {
            comparing = try PrivateFile.open(path, O_RDONLY)
            guard comparing >= 0 else {
                throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "open failed")
            }
        }
        let file = comparing
        let step = min(bytes.count, 64 * 1024)
        return try withUnsafeTemporaryAllocation(byteCount: max(step, 1), alignment: 16) {
            (scratch: UnsafeMutableRawBufferPointer) throws(DownloadError) -> Bool in
            var done = 0
            while done < bytes.count {
                let count = min(step, bytes.count - done)
                let got = read(
                    file,
                    into: UnsafeMutableRawBufferPointer(rebasing: scratch[..<count]),
                    at: offset + Int64(done)
                )
                guard got >= 0 else {
                    throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "read failed")
                }
                // A file shorter than its length on record is not what the download holds.
                guard got == count, memcmp(scratch.baseAddress!, bytes.baseAddress! + done, count) == 0 else {
                    return false
                }
                done += count
            }
            return true
        }
    }

    /// Reads `buffer.count` bytes of `file` at `offset`, going on after short reads: how many it
    /// read (fewer at the file's end), or -1 with `errno` set.
    private func read(_ file: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int {
        var done = 0
        while done < buffer.count {
            let got = pread(file, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return got < 0 ? -1 : done }
            done += got
        }
        return done
    }

    /// Closes the descriptor ``holds(_:at:)`` reads with.
    package func endComparing() {
        guard comparing >= 0 else { return }
        Glibc.close(comparing)
        comparing = -1
    }
}
