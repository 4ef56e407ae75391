import CHaul
import Glibc
import HaulValues

/// The unwritten end of a finished partial file (``FileSink/handOff()``), owned by whoever holds it:
/// the disk thread, or the loop thread that writes a whole small file itself.
package struct PartialRemainder: @unchecked Sendable {
    // @unchecked Sendable: the sink gave up the descriptor and the buffer; one thread uses them.
    let descriptor: Int32
    let buffer: UnsafeMutableRawBufferPointer?
    let count: Int
    let offset: Int64
    let pool: BufferPool
    /// Whether the file, when it must be opened, is emptied first (see `FileSink.init`).
    var replacesFile = false
    /// Whether a file may be at the partial path (the sink found, truncated or opened one): a whole
    /// file named elsewhere must not leave it behind.
    var partialMayExist = false
    /// `descriptor` is a nameless file that already holds the first `offset` bytes, the whole
    /// download (``writtenNameless(in:)``); ``writeWhole(to:tryNameless:)`` syncs and names it.
    var isNameless = false

    /// A nameless file in `folder` (the working directory for ""), or -1 with errno
    /// (`CHaul_open_nameless`; the path through `withCString`, which does not copy it).
    static func openNameless(in folder: String) -> Int32 {
        (folder.isEmpty ? "." : folder).withCString { CHaul_open_nameless($0) }
    }

    /// This remainder of a sink that never wrote, written now into a nameless file in `folder`:
    /// its buffer goes back to the pool at once rather than after its turn on the disk thread
    /// (with 100 small downloads at once, the disk thread's queue held about half of the 100
    /// buffers at any time). `nil` (and nothing changed) where the file system has no nameless
    /// files or the write fails: the disk thread then does it all and reports the error.
    package func writtenNameless(in folder: String) -> PartialRemainder? {
        guard descriptor < 0, let buffer, count > 0 else { return nil }
        let nameless = Self.openNameless(in: folder)
        guard nameless >= 0 else { return nil }
        do {
            try writeBuffered(to: nameless, at: 0, path: folder)
        } catch {
            Glibc.close(nameless)
            return nil
        }
        pool.give(buffer)
        return PartialRemainder(
            descriptor: nameless,
            buffer: nil,
            count: 0,
            offset: Int64(count),
            pool: pool,
            partialMayExist: partialMayExist,
            isNameless: true
        )
    }

    /// Writes the bytes (opening, or creating, the file at `path` if the sink never did) and
    /// returns the open descriptor; the buffer goes back to its pool either way.
    func write(to path: String) throws(DownloadError) -> Int32 {
        defer { if let buffer { pool.give(buffer) } }
        let descriptor =
            self.descriptor >= 0
            ? self.descriptor
            : try PrivateFile.open(path, O_WRONLY | O_CREAT | (replacesFile ? O_TRUNC : 0))
        guard descriptor >= 0 else {
            throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "open failed")
        }
        do {
            try writeBuffered(to: descriptor, at: offset, path: path)
        } catch {
            Glibc.close(descriptor)
            throw error
        }
        return descriptor
    }

    /// How a whole file written by ``stageWhole(to:tryNameless:)`` gets its name once it is synced.
    enum WholeNaming: Sendable {
        /// A nameless file in the folder: linked at the path.
        case nameless
        /// A file beside the path (no nameless files here): renamed onto it.
        case staged(String)
    }

    /// Writes the bytes of a sink that never wrote any so that `path` appears only once it holds
    /// all of them, durably: a nameless file in `path`'s folder, synced, then named (or, where the
    /// file system has no nameless files or one cannot be named, a file beside `path` renamed
    /// onto it). A crash leaves either no file or the whole one, never a start that a resume would
    /// continue. Returns the open descriptor; the buffer goes back to its pool either way.
    /// (`tryNameless: false` goes straight to the named file, for tests.)
    func writeWhole(to path: String, tryNameless: Bool = true) throws(DownloadError) -> Int32 {
        let (descriptor, naming) = try stageWhole(to: path, tryNameless: tryNameless)
        _ = fdatasync(descriptor)
        return try Self.nameWhole(descriptor, naming, at: path, length: offset + Int64(count), pool: pool)
    }

    /// ``writeWhole(to:tryNameless:)`` up to the sync, which the caller makes (one for many files,
    /// ``DiskLanes``): the bytes in a file nobody finds at `path` yet. Returns its descriptor and
    /// how to name it once synced (``nameWhole(_:_:at:length:pool:)``).
    func stageWhole(to path: String, tryNameless: Bool = true) throws(DownloadError) -> (Int32, WholeNaming) {
        do throws(DownloadError) {
            if isNameless { return (descriptor, .nameless) }
            defer { if let buffer { pool.give(buffer) } }
            let folder = FilePath.directory(of: path)
            let nameless = tryNameless ? Self.openNameless(in: folder) : -1
            if nameless >= 0 {
                do throws(DownloadError) {
                    try writeBuffered(to: nameless, at: 0, path: path)
                } catch {
                    Glibc.close(nameless)
                    throw error
                }
                return (nameless, .nameless)
            }
            let staging = "\(path).whole"
            let descriptor = try PrivateFile.open(staging, O_WRONLY | O_CREAT | O_TRUNC)
            guard descriptor >= 0 else {
                throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: staging, detail: "open failed")
            }
            do throws(DownloadError) {
                try writeBuffered(to: descriptor, at: 0, path: path)
            } catch {
                Glibc.close(descriptor)
                unlink(staging)
                throw error
            }
            return (descriptor, .staged(staging))
        } catch {
            var error = error
            error.nothingKept = true  // nothing at `path`: the download starts again from zero
            throw error
        }
    }

    /// Names a whole file ``stageWhole(to:tryNameless:)`` wrote, once it is synced: `path` appears
    /// holding all of its `length` bytes. Where a nameless file cannot be named (``CHaul_link_nameless``
    /// refused both by its descriptor and through /proc), its bytes are read back and written to a
    /// named file, synced. Returns the open descriptor.
    static func nameWhole(
        _ descriptor: Int32,
        _ naming: WholeNaming,
        at path: String,
        length: Int64,
        pool: BufferPool
    ) throws(DownloadError) -> Int32 {
        do throws(DownloadError) {
            switch naming {
            case .staged(let staging):
                guard rename(staging, path) == 0 else {
                    let code = errno
                    Glibc.close(descriptor)
                    unlink(staging)
                    throw DownloadError(code: .fileSystem, url: nil, errno: code, path: path, detail: "rename failed")
                }
                return descriptor
            case .nameless:
                if name(descriptor, path) { return descriptor }
                return try copyNamed(descriptor, to: path, length: Int(length), pool: pool)
            }
        } catch {
            var error = error
            error.nothingKept = true
            throw error
        }
    }

    /// The bytes of the nameless file `descriptor` (at most a buffer's worth), read back and written
    /// whole to `path`, for a system that cannot name it (no /proc, and no privilege to link the
    /// descriptor itself).
    private static func copyNamed(_ descriptor: Int32, to path: String, length: Int, pool: BufferPool)
        throws(DownloadError) -> Int32
    {
        defer { Glibc.close(descriptor) }
        guard length <= pool.bufferSize, let buffer = pool.take(beyondLimit: true) else {
            throw DownloadError(
                code: .internalError,
                url: nil,
                path: path,
                detail: "no buffer to copy the file into"
            )
        }
        var read = 0
        while read < length {
            let result = pread(descriptor, buffer.baseAddress! + read, length - read, off_t(read))
            if result < 0, errno == EINTR { continue }
            guard result > 0 else {
                pool.give(buffer)
                let code = result < 0 ? errno : EIO
                throw DownloadError(
                    code: .fileSystem,
                    url: nil,
                    errno: code,
                    path: path,
                    detail: "read back failed"
                )
            }
            read += result
        }
        let named = PartialRemainder(descriptor: -1, buffer: buffer, count: length, offset: 0, pool: pool)
        return try named.writeWhole(to: path, tryNameless: false)
    }

    /// Links the nameless file `descriptor` at `path`, replacing a file already there (a partial
    /// file the sink did not know of): whether it could.
    private static func name(_ descriptor: Int32, _ path: String) -> Bool {
        if CHaul_link_nameless(descriptor, path) == 0 { return true }
        guard errno == EEXIST else { return false }
        unlink(path)
        return CHaul_link_nameless(descriptor, path) == 0
    }

    /// Writes the buffered bytes, if any, to `descriptor` at `offset` (`path` names it in errors).
    private func writeBuffered(to descriptor: Int32, at offset: Int64, path: String) throws(DownloadError) {
        guard let buffer, count > 0 else { return }
        var written = 0
        try FileSink.write(
            UnsafeRawBufferPointer(rebasing: buffer[0..<count]),
            to: descriptor,
            at: offset,
            path: path,
            written: &written
        )
    }

    /// Lets go of the descriptor and the buffer without writing.
    func discard() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        if let buffer { pool.give(buffer) }
    }
}
