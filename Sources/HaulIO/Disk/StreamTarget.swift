import Glibc
import HaulValues

/// A destination that is not a regular file: a character device, a FIFO, a socket or an inherited
/// descriptor (standard output). The body is written to it in order as it arrives: no partial file,
/// no rename, nothing beside it; it stays what it was. Bytes written cannot be taken back, so a
/// download into a stream resumes within its process only (from ``accepted``), and fails rather than
/// starting over.
///
/// The descriptor is non-blocking when it is this process's own open file description (a FIFO or
/// device opened here, standard output opened again through `/proc/self/fd`): a reader that falls
/// behind leaves bytes ``pending`` and the transfer waits for the descriptor to be writable (curl
/// holds the next chunk paused; ``Transfer``). An inherited regular file is written as it is, at its
/// own offset (`>>` appends).
///
/// Made on the caller's thread by the request, kept by the ``Catalog`` until the download ends,
/// written on the loop thread only.
package final class StreamTarget: @unchecked Sendable {
    // @unchecked Sendable: made and closed under the catalog's lock, written on the loop thread only.
    /// What the destination is, in words (for errors).
    let kind: String
    /// The destination's path as asked for.
    let path: String
    package private(set) var descriptor: Int32
    /// Bytes the kernel took.
    package private(set) var delivered: Int64 = 0
    /// Bytes accepted from the server that the reader has not taken yet, written first.
    private var pending: [UInt8] = []

    /// Bytes accepted: delivered and pending. A resume asks for the bytes after these.
    var accepted: Int64 { delivered + Int64(pending.count) }
    /// The last bytes accepted, at least ``tailLimit`` of them (up to twice as many between trims),
    /// once ``keepTail(_:)`` was called: a stream cannot be read back, and a resume that no
    /// validator proves compares the server's answer with them (``ResumePlan``'s `verify`).
    private var tail: [UInt8] = []
    /// How many of the last bytes are kept (0: none).
    private(set) var tailLimit = 0
    /// Whether bytes wait for the reader.
    package var hasPending: Bool { !pending.isEmpty }

    /// The body is counted and thrown away (``DownloadRequest/discarding(_:headers:)``): no
    /// descriptor, nothing written, never behind.
    package let discards: Bool

    init(descriptor: Int32, kind: String, path: String) {
        self.descriptor = descriptor
        self.kind = kind
        self.path = path
        self.discards = false
        self.collector = nil
    }

    /// A target that discards the body, shown as `path`.
    package init(discardingAs path: String) {
        self.descriptor = -1
        self.kind = "nothing (the body is discarded)"
        self.path = path
        self.discards = true
        self.collector = nil
    }

    /// Where the body is collected, for a body asked for in memory
    /// (``DownloadManager/data(from:headers:maximumSize:)``): no descriptor, never behind.
    package let collector: BodyCollector?

    /// A target that collects the body into `collector`, shown as `path`.
    package init(collectingInto collector: BodyCollector, as path: String) {
        self.descriptor = -1
        self.kind = "memory"
        self.path = path
        self.discards = true
        self.collector = collector
    }

    /// A discarded or collected body starts again from its first byte (nothing of it was handed on).
    func restart() {
        delivered = 0
        pending = []
        tail = []
        collector?.reset()
    }

    /// Keeps the last `length` bytes accepted from now on (a body in memory has them all already; a
    /// discarded one has none to keep).
    package func keepTail(_ length: Int) {
        if !discards { tailLimit = max(tailLimit, length) }
    }

    /// Why this stream cannot start over from its first byte for `reason` (`nil`: the server sent the
    /// file from its start of its own accord); `nil` when it can (a discarded or collected body, or
    /// nothing accepted yet).
    package func cannotStartOver(because reason: RestartReason?) -> DownloadError? {
        guard !discards, accepted > 0 else { return nil }
        let why = reason.map { "\($0)" } ?? "the server sent the file from its start again"
        var error = DownloadError(
            code: .streamCannotRestart,
            url: nil,
            path: path,
            detail: "\(why); the \(accepted) bytes already written to \(kind) cannot be taken back, and "
                + "nothing was spliced"
        )
        error.suggestsUnvalidatedResume = reason == .noValidator
        return error
    }

    /// The bytes accepted from `offset` on, when they are still known: a body in memory's, or the
    /// kept tail's (``keepTail(_:)``); `nil` otherwise.
    package func acceptedBytes(from offset: Int64) -> [UInt8]? {
        guard offset >= 0, offset <= accepted else { return nil }
        if let collector { return collector.bytes(from: Int(offset)) }
        let first = accepted - Int64(tail.count)
        guard tailLimit > 0, offset >= first else { return nil }
        return Array(tail[Int(offset - first)...])
    }

    /// Whether `bytes`, at `offset` of the body, are the ones accepted there, as far as they are still
    /// known (a body in memory's, or the kept tail's: ``keepTail(_:)``); bytes before the tail are
    /// gone and compare with nothing.
    func holds(_ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Bool {
        let end = offset + Int64(bytes.count)
        guard end <= accepted else { return false }
        if let collector { return collector.holds(bytes, at: Int(offset)) }
        let first = max(offset, accepted - Int64(tail.count))
        guard first < end else { return true }
        let count = Int(end - first)
        let from = Int(first - (accepted - Int64(tail.count)))
        return tail.withUnsafeBytes { held in
            memcmp(held.baseAddress! + from, bytes.baseAddress! + Int(first - offset), count) == 0
        }
    }

    deinit { close() }

    /// Opens `path` (a device, a FIFO, a socket: `status` is what `stat` found there), or the
    /// descriptor a `/proc/self/fd/N` link names (`inherited`). A FIFO waits for its reader, as with
    /// curl, until `stopped` says the wait is over (its manager shut down).
    package static func open(
        path: String,
        status: stat,
        inherited: Int32?,
        url: String,
        stopped: () -> Bool
    ) throws(DownloadError) -> StreamTarget {
        let kind = FilePath.kind(of: status.st_mode)
        let type = status.st_mode & S_IFMT
        var descriptor: Int32 = -1
        var ownDescription = true
        if let inherited {
            // Opened again (a description of this process's own, which may be non-blocking) for a
            // pipe, FIFO or terminal; a regular file or a socket shares the inherited one.
            if type == S_IFIFO || type == S_IFCHR {
                descriptor = Glibc.open("/proc/self/fd/\(inherited)", O_WRONLY | O_CLOEXEC | O_NOCTTY)
            }
            if descriptor < 0 {
                descriptor = fcntl(inherited, F_DUPFD_CLOEXEC, 0)
                ownDescription = false
            }
        } else if type == S_IFSOCK {
            descriptor = connectUnixSocket(path)
        } else if type == S_IFIFO {
            descriptor = try openFIFO(path, url: url, stopped: stopped)
        } else {
            descriptor = Glibc.open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY)
        }
        guard descriptor >= 0 else {
            throw DownloadError(code: .fileSystem, url: url, errno: errno, path: path, detail: "open \(kind) failed")
        }
        // What was opened must be what was looked at: a FIFO waits for its reader long enough for
        // someone to put a symbolic link to another file in its place.
        var opened = stat()
        if inherited == nil, type != S_IFSOCK,
            fstat(descriptor, &opened) != 0 || opened.st_dev != status.st_dev || opened.st_ino != status.st_ino
        {
            Glibc.close(descriptor)
            throw DownloadError(
                code: .unsupportedDestination,
                url: url,
                path: path,
                detail: "no longer what it was when the download was asked for (\(kind)): something else was put "
                    + "there meanwhile"
            )
        }
        if ownDescription && type != S_IFREG {
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        }
        return StreamTarget(descriptor: descriptor, kind: describe(inherited: inherited, type: type, kind), path: path)
    }

    /// The destination in an error's words: an inherited descriptor is named for what it is to this
    /// process (standard output, or a pipe: `stream(from:)`'s, or one a parent handed down), not
    /// for the kind of file behind it.
    private static func describe(inherited: Int32?, type: mode_t, _ kind: String) -> String {
        switch inherited {
        case nil: kind
        case 1: "standard output"
        case 2: "standard error"
        case .some where type == S_IFIFO: "a pipe"
        case .some(let descriptor) where type == S_IFREG: "the file open as descriptor \(descriptor)"
        case .some: kind
        }
    }

    /// Opens a FIFO for writing once it has a reader. `open` would block until then, past a
    /// shutdown (a Ctrl-C did not stop `haul -o fifo` before a reader came): it is tried without
    /// blocking every 20 ms instead, until `stopped`. (No event tells a writer that a reader came:
    /// a reader blocked in its `open` is not opened yet for inotify.)
    private static func openFIFO(_ path: String, url: String, stopped: () -> Bool) throws(DownloadError) -> Int32 {
        while true {
            let descriptor = Glibc.open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
            if descriptor >= 0 || errno != ENXIO { return descriptor }
            if stopped() {
                throw DownloadError(
                    code: .shutdown,
                    url: url,
                    path: path,
                    detail: "its manager shut down while it waited for a reader of the FIFO"
                )
            }
            usleep(20_000)
        }
    }

    private static func connectUnixSocket(_ path: String) -> Int32 {
        var address = sockaddr_un()
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            errno = ENAMETOOLONG
            return -1
        }
        let socketFD = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socketFD >= 0 else { return -1 }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let error = errno
            Glibc.close(socketFD)
            errno = error
            return -1
        }
        return socketFD
    }

    /// Writes what is pending. Returns whether nothing is pending any more (`false`: the reader is
    /// behind; wait until the descriptor is writable).
    package func flushPending() throws(DownloadError) -> Bool {
        guard !pending.isEmpty else { return true }
        var result: Result<Int, DownloadError> = .success(0)
        pending.withUnsafeBytes { bytes in
            result = Result { () throws(DownloadError) in try writeSome(bytes) }
        }
        pending.removeFirst(try result.get())
        return pending.isEmpty
    }

    /// Writes `bytes` after what is pending; what the reader does not take now is kept pending.
    func write(_ bytes: UnsafeRawBufferPointer) throws(DownloadError) {
        guard try flushPending() else {
            pending.append(contentsOf: bytes)
            keep(bytes)
            return
        }
        let written = try writeSome(bytes)
        if written < bytes.count { pending.append(contentsOf: bytes[written...]) }
        keep(bytes)
    }

    /// Adds accepted bytes to the tail, when one is kept.
    private func keep(_ bytes: UnsafeRawBufferPointer) {
        guard tailLimit > 0, !bytes.isEmpty else { return }
        tail.append(contentsOf: bytes)
        if tail.count > 2 * tailLimit { tail.removeFirst(tail.count - tailLimit) }
    }

    /// Writes as much of `bytes` as the descriptor takes now; returns how many.
    private func writeSome(_ bytes: UnsafeRawBufferPointer) throws(DownloadError) -> Int {
        if discards {
            if let collector, !collector.append(bytes) {
                throw DownloadError(
                    code: .internalError,
                    url: nil,
                    errno: ENOMEM,
                    detail: "no memory for the body's next \(bytes.count) bytes past \(delivered)"
                )
            }
            delivered += Int64(bytes.count)
            return bytes.count
        }
        var written = 0
        while written < bytes.count {
            let result = Glibc.write(descriptor, bytes.baseAddress! + written, bytes.count - written)
            if result < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { break }
                let code = errno
                var error = DownloadError(
                    code: .fileSystem,
                    url: nil,
                    errno: code,
                    path: path,
                    detail: code == EPIPE ? "the reader of \(kind) went away" : "write to \(kind) failed"
                )
                error.wroteThrough = true
                var status = stat()
                error.wroteToDevice = fstat(descriptor, &status) == 0 && status.st_mode & S_IFMT == S_IFCHR
                throw error
            }
            written += result
        }
        delivered += Int64(written)
        return written
    }

    /// Closes the descriptor.
    func close() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }
}
