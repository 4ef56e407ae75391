import Glibc

/// The partial file of one download, written in `bufferSize` chunks.
///
/// Bytes are collected in a buffer (YYDownload's `kBufferSize`) and handed to the kernel when it
/// fills, on ``flush()`` (pause, end) and before ``close()``. ``committedLength`` counts only bytes
/// the kernel accepted: that is what progress reports. Loop thread only.
final class FileSink {
    let path: String
    private var descriptor: Int32
    private var buffer: UnsafeMutableRawBufferPointer?
    private let pool: BufferPool
    private var bufferSize: Int { pool.bufferSize }
    private var buffered = 0
    /// Bytes handed to the kernel; the file's length as far as Haul knows.
    private(set) var committedLength: Int64
    /// Bytes collected and not yet written.
    var bufferedCount: Int { buffered }

    /// Opens (creating if needed) the partial file at `path`, positioned after its current bytes;
    /// its buffer comes from `pool` when bytes arrive.
    init(path: String, pool: BufferPool) throws(DownloadError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "open failed")
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            throw DownloadError(code: .fileSystem, url: nil, errno: code, path: path, detail: "fstat failed")
        }
        self.path = path
        self.descriptor = descriptor
        self.pool = pool
        self.committedLength = Int64(status.st_size)
    }

    deinit {
        if let buffer { pool.give(buffer) }
        if descriptor >= 0 { Glibc.close(descriptor) }
    }

    /// Adds bytes; writes the buffer out each time it fills.
    ///
    /// - Returns: whether bytes were handed to the kernel during this call.
    @discardableResult
    func append(_ bytes: UnsafeRawBufferPointer) throws(DownloadError) -> Bool {
        var wrote = false
        var remaining = bytes
        // A chunk at least as large as the buffer, arriving with the buffer empty, skips the copy.
        if buffered == 0 && remaining.count >= bufferSize {
            try writeFully(remaining)
            return true
        }
        while !remaining.isEmpty {
            let storage = buffer ?? {
                let storage = pool.take()
                buffer = storage
                return storage
            }()
            let count = min(remaining.count, bufferSize - buffered)
            UnsafeMutableRawBufferPointer(rebasing: storage[buffered..<(buffered + count)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: remaining[0..<count]))
            buffered += count
            remaining = UnsafeRawBufferPointer(rebasing: remaining[count...])
            if buffered == bufferSize {
                try flush()
                wrote = true
            }
        }
        return wrote
    }

    /// Hands buffered bytes to the kernel.
    func flush() throws(DownloadError) {
        guard buffered > 0, let buffer else { return }
        let pending = UnsafeRawBufferPointer(rebasing: buffer[0..<buffered])
        buffered = 0
        try writeFully(pending)
    }

    /// Empties the file and the buffer: the download starts again from byte 0.
    func truncate() throws(DownloadError) {
        buffered = 0
        guard ftruncate(descriptor, 0) == 0 else {
            throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "ftruncate failed")
        }
        committedLength = 0
    }

    /// Writes what is buffered and closes the file.
    func close() throws(DownloadError) {
        defer {
            if descriptor >= 0 { Glibc.close(descriptor) }
            descriptor = -1
            if let buffer { pool.give(buffer) }
            buffer = nil
        }
        try flush()
    }

    private func writeFully(_ bytes: UnsafeRawBufferPointer) throws(DownloadError) {
        var offset = 0
        while offset < bytes.count {
            let written = pwrite(descriptor, bytes.baseAddress! + offset, bytes.count - offset, off_t(committedLength))
            if written < 0 {
                if errno == EINTR { continue }
                throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "write failed")
            }
            offset += written
            committedLength += Int64(written)
        }
    }
}
