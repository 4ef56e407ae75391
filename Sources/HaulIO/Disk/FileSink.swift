import CHaul
import Glibc
import HaulValues

/// The partial file of one download, written in `bufferSize` chunks.
///
/// Bytes are collected in a buffer (YYDownload's `kBufferSize`) and handed to the kernel when it
/// fills, on ``flush()`` (pause, checkpoint) and before ``close()``. ``committedLength`` counts only
/// bytes the kernel accepted: that is what progress reports. The file is opened when bytes are first
/// written: a download that fits in its buffer is written by the disk thread only, once it is whole
/// (``handOff()``), and its loop thread never touches the file.
///
/// A slow download gains nothing from a buffer and would pin one per transfer (thousands of
/// rate-limited transfers). So a sink starts by writing each chunk as it comes, and takes a buffer
/// when the bytes come fast: a chunk of at least ``largeChunk`` bytes (the socket held more than a
/// trickle), or ``fastBytes`` within ``idleAge``. A buffer left unfilled for ``idleAge`` is written
/// out and given back (``releaseIfIdle(now:)``), and the sink writes through again.
///
/// The file stays open between writes while the manager's share of descriptors for partial files
/// (``OpenPartialFiles``) allows; past it, a sink closes its file after each write and opens it again
/// for the next: thousands of slow transfers then hold a socket each, not a socket and a file.
/// Loop thread only; what a finished download still has to write leaves it as a
/// ``PartialRemainder`` for the disk thread (``handOff()``).
package final class FileSink {
    let path: String
    /// The stream the body goes to instead of a partial file (a device, a FIFO, standard output):
    /// each chunk is written to it as it comes, in order, with no buffer (``StreamTarget``).
    let stream: StreamTarget?
    private(set) var descriptor: Int32 = -1
    /// Whether the partial file is open now (a slow download closes it between writes).
    package var holdsDescriptor: Bool { descriptor >= 0 }
    private var buffer: UnsafeMutableRawBufferPointer?
    private let pool: BufferPool
    private let openFiles: OpenPartialFiles
    private var bufferSize: Int { pool.bufferSize }
    private var buffered = 0
    /// Bytes handed to the kernel; the file's length as far as Haul knows.
    package private(set) var committedLength: Int64
    /// Bytes collected and not yet written.
    package var bufferedCount: Int { buffered }
    /// Every byte received: written or buffered.
    package var receivedLength: Int64 { committedLength + Int64(buffered) }

    /// How long a buffer may wait for bytes before it is written out and given back.
    package static let idleAge: UInt64 = 250_000_000  // nanoseconds
    /// When the buffer last received bytes (uptime nanoseconds).
    private var lastAppendAt: UInt64 = 0
    /// A chunk this large means the bytes come faster than they are read: buffer them. (HTTP/2 hands
    /// over a DATA frame at a time, 8 KiB or less from nginx, often cut by TLS records.)
    static let largeChunk = 4 * 1024
    /// So many bytes written through within ``idleAge`` (128 KiB/s with the default buffer) mean
    /// the download is fast: the next chunks are buffered.
    var fastBytes: Int { bufferSize / 4 }
    /// Writing each chunk straight to the file: the download is slow (or has not shown it is fast).
    private(set) var writesThrough = true
    /// Bytes written through since `windowStart`: a buffer's worth within ``idleAge`` means fast again.
    private var windowStart: UInt64 = 0
    private var windowBytes = 0

    /// The descriptor the partial file is read back with while an answer is compared with it
    /// (``holds(_:at:)``), or -1.
    var comparing: Int32 = -1

    /// Whether the file is emptied when first opened: its bytes, if any, are not this download's.
    private var replacesFile = false
    /// Whether a file may be at `path`: found there, truncated or opened by this sink, or not looked
    /// for (a sink that starts empty).
    private var pathMayHoldFile = false

    /// The partial file at `path` (which need not exist yet), continued after its current bytes; its
    /// buffer comes from `pool` when bytes arrive. With `startsEmpty`, the file is not looked at and
    /// whatever it holds is replaced when bytes are first written. `openFiles` counts the descriptor
    /// while the sink holds it (by default a count of its own, with no practical limit).
    package init(
        path: String,
        pool: BufferPool,
        openFiles: OpenPartialFiles = OpenPartialFiles(limit: .max),
        startsEmpty: Bool = false
    ) throws(DownloadError) {
        self.path = path
        self.pool = pool
        self.openFiles = openFiles
        self.stream = nil
        if startsEmpty {
            committedLength = 0
            replacesFile = true
            // Not looked at, but a process killed before its row said so may have left bytes
            // there: a whole file named elsewhere (nameless, linked into place) removes them.
            pathMayHoldFile = true
            return
        }
        var status = stat()
        if lstat(path, &status) == 0 {
            try PrivateFile.check(status, path: path)
            committedLength = Int64(status.st_size)
            pathMayHoldFile = true
        } else if errno == ENOENT {
            committedLength = 0
        } else {
            throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "stat failed")
        }
    }

    /// A sink that writes to `stream`, after the bytes it accepted already (an earlier attempt's).
    package init(stream: StreamTarget, pool: BufferPool) {
        self.path = stream.path
        self.pool = pool
        self.openFiles = OpenPartialFiles(limit: .max)
        self.stream = stream
        committedLength = stream.accepted
    }

    deinit {
        if let buffer { pool.give(buffer) }
        closeDescriptor()
        endComparing()
    }

    /// Adds bytes; writes the buffer out each time it fills.
    ///
    /// - Returns: whether bytes were handed to the kernel during this call.
    @discardableResult
    package func append(_ bytes: UnsafeRawBufferPointer, now: UInt64) throws(DownloadError) -> Bool {
        if let stream {
            if let hook = beforeFirstWrite {
                beforeFirstWrite = nil
                try hook()
            }
            try stream.write(bytes)
            committedLength = stream.accepted
            return true
        }
        lastAppendAt = now
        if writesThrough {
            if bytes.count >= Self.largeChunk {
                writesThrough = false  // fast: this chunk goes to a buffer
            } else {
                if now &- windowStart > Self.idleAge {
                    windowStart = now
                    windowBytes = 0
                }
                windowBytes += bytes.count
                if windowBytes >= fastBytes { writesThrough = false }  // fast: buffer from the next chunk
                try writeFully(bytes)
                return true
            }
        }
        var wrote = false
        var remaining = bytes
        while !remaining.isEmpty {
            // With the buffer empty, the rest of a chunk at least as large as the buffer skips the copy.
            if buffered == 0 && remaining.count >= bufferSize {
                try writeFully(remaining)
                return true
            }
            guard let storage = buffer ?? pool.take() else {
                // No buffer free (the pool's limit is reached, or no memory): this chunk goes
                // straight to the file.
                try flush()
                try writeFully(remaining)
                return true
            }
            buffer = storage
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

    /// The rest of the body fits in a buffer: collect it there from the first chunk (a small file is
    /// then written once, whole, instead of a write per chunk), unless the buffer stays idle for
    /// ``idleAge`` (a slow answer gives it back as any other).
    package func collectsWholeRest() {
        writesThrough = false
    }

    /// Writes out and gives back a buffer that received nothing for ``idleAge``; the sink then writes
    /// through. Returns whether it let go of a buffer.
    @discardableResult
    package func releaseIfIdle(now: UInt64) throws(DownloadError) -> Bool {
        guard let buffer, now &- lastAppendAt >= Self.idleAge else { return false }
        try flush()
        pool.give(buffer)
        self.buffer = nil
        writesThrough = true
        windowStart = now
        windowBytes = 0
        return true
    }

    /// Hands buffered bytes to the kernel.
    package func flush() throws(DownloadError) {
        guard buffered > 0, let buffer else { return }
        let pending = UnsafeRawBufferPointer(rebasing: buffer[0..<buffered])
        buffered = 0
        try writeFully(pending)
    }

    /// Reserves the blocks of a file of `total` bytes (its length stays the bytes written), so that a
    /// disk too small fails now with ENOSPC rather than at 90 %. A file system that cannot
    /// preallocate (EOPNOTSUPP) is left to allocate as it writes. Opens the file.
    package func preallocate(_ total: Int64) throws(DownloadError) {
        guard stream == nil, total > committedLength else { return }
        if descriptor < 0 { try openFile() }
        defer { if openFiles.isOverLimit { closeDescriptor() } }
        guard CHaul_preallocate(descriptor, committedLength, total - committedLength) != 0 else { return }
        let error = errno
        guard error == ENOSPC || error == EDQUOT || error == EFBIG else { return }
        var failure = DownloadError(
            code: .fileSystem,
            url: nil,
            errno: error,
            path: path,
            detail: "the file needs \(total) bytes, more than the disk has free"
        )
        // Reserved before any byte: no partial file worth keeping (the failure removes the empty one).
        failure.nothingKept = committedLength == 0
        throw failure
    }

    /// Writes what is buffered, then puts the next bytes at `offset` (a segment of a file fetched
    /// over several connections: each has a sink of its own, at its place in the file).
    package func move(to offset: Int64) throws(DownloadError) {
        try flush()
        committedLength = offset
    }

    /// Empties the file and the buffer: the download starts again from byte 0.
    package func truncate() throws(DownloadError) {
        if let stream {
            if let error = stream.cannotStartOver(because: nil) { throw error }
            if stream.discards {
                // Nothing was kept: the count starts again.
                stream.restart()
                committedLength = 0
            }
            return
        }
        buffered = 0
        var status: Int32 = 0
        if descriptor >= 0 {
            status = ftruncate(descriptor, 0)
        } else {
            // Not `truncate(path)`, which follows a link put there.
            let file = try PrivateFile.open(path, O_WRONLY | O_TRUNC)
            if file >= 0 { Glibc.close(file) } else { status = -1 }
        }
        guard status == 0 || (descriptor < 0 && errno == ENOENT) else {
            throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "ftruncate failed")
        }
        if status == 0 { pathMayHoldFile = true }
        committedLength = 0
    }

    /// Writes what is buffered and closes the file.
    package func close() throws(DownloadError) {
        defer {
            closeDescriptor()
            endComparing()
            if let buffer { pool.give(buffer) }
            buffer = nil
        }
        try flush()
    }

    /// What a finished download still has to write, for the disk thread: the sink lets go of its
    /// file and buffer.
    package func handOff() -> PartialRemainder {
        defer {
            if descriptor >= 0 { openFiles.closed() }  // the disk thread closes it
            descriptor = -1
            buffer = nil
            buffered = 0
        }
        return PartialRemainder(
            descriptor: descriptor,
            buffer: buffer,
            count: buffered,
            offset: committedLength,
            pool: pool,
            replacesFile: replacesFile && descriptor < 0,
            partialMayExist: pathMayHoldFile
        )
    }

    private func openFile() throws(DownloadError) {
        descriptor = try PrivateFile.open(path, O_WRONLY | O_CREAT | (replacesFile ? O_TRUNC : 0))
        guard descriptor >= 0 else {
            throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "open failed")
        }
        openFiles.opened()
        replacesFile = false
        pathMayHoldFile = true
    }

    private func closeDescriptor() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
        openFiles.closed()
    }

    /// Runs once, before the next bytes are handed to the kernel (the transfer writes the journal
    /// row that must describe them first).
    package var beforeFirstWrite: (() throws(DownloadError) -> Void)?

    private func writeFully(_ bytes: UnsafeRawBufferPointer) throws(DownloadError) {
        if let hook = beforeFirstWrite {
            beforeFirstWrite = nil
            try hook()
        }
        if descriptor < 0 { try openFile() }
        var written = 0
        defer {
            committedLength += Int64(written)
            if openFiles.isOverLimit { closeDescriptor() }
        }
        try Self.write(bytes, to: descriptor, at: committedLength, path: path, written: &written)
    }

    /// Writes all of `bytes` at `offset`, going on after short writes; `written` counts what the kernel
    /// took, also when a later write fails.
    static func write(
        _ bytes: UnsafeRawBufferPointer,
        to descriptor: Int32,
        at offset: Int64,
        path: String,
        written: inout Int
    ) throws(DownloadError) {
        while written < bytes.count {
            let result = pwrite(
                descriptor,
                bytes.baseAddress! + written,
                bytes.count - written,
                off_t(offset + Int64(written))
            )
            if result < 0 {
                if errno == EINTR { continue }
                throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "write failed")
            }
            written += result
        }
    }
}
