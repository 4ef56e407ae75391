import CHaul
import FoundationEssentials
import Glibc
import HaulValues

/// Moving a finished file to its destination: a rename, or a copy where the destination is on
/// another file system.
extension FinishJob {
    /// Renames the finished partial file to its destination: the destination holds either its old
    /// content or the whole new file, never a part. The destination's folder is created when missing.
    /// Returns whether it was renamed (`false`: copied across file systems, with a new time).
    @discardableResult
    static func moveIntoPlace(
        from source: String,
        to destination: String,
        replacing: Bool = true
    ) throws(DownloadError) -> Bool {
        // `replacing: false`: fails with EEXIST rather than replace whatever is at `destination`.
        let place = { (from: String, to: String) -> Int32 in
            replacing ? rename(from, to) : CHaul_rename_noreplace(from, to)
        }
        var status = stat()
        if lstat(destination, &status) == 0, ![S_IFREG, S_IFLNK].contains(status.st_mode & S_IFMT) {
            // A device, a FIFO, a socket or a folder there now (made during the download, or a
            // stream's row restored by a later process) is never replaced by a file.
            throw DownloadError(
                code: .unsupportedDestination,
                url: nil,
                path: destination,
                detail: "\(FilePath.kind(of: status.st_mode)) now, which a finished file never replaces"
            )
        }
        // The partial file was opened and checked (``PrivateFile``); what has its name now must be a
        // file still, not a link put there since, which a rename would place at the destination.
        if lstat(source, &status) == 0, status.st_mode & S_IFMT != S_IFREG {
            throw PrivateFile.unsafe(source, "\(FilePath.kind(of: status.st_mode)), not the file Haul wrote")
        }
        if place(source, destination) == 0 { return true }
        var renameError = errno
        let directory = FilePath.directory(of: destination)
        if renameError == ENOENT, !directory.isEmpty {
            _ = FilePath.makeDirectories(directory)
            if place(source, destination) == 0 { return true }
            renameError = errno
        }
        if renameError == ENOENT, access(source, F_OK) != 0 { throw partialDeleted(source, url: nil) }
        guard renameError == EXDEV else {
            throw DownloadError(
                code: .fileSystem,
                url: nil,
                errno: renameError,
                path: destination,
                detail: "rename into place failed"
            )
        }
        // The state directory is on another file system: copy next to the destination, then rename.
        // Named after the partial file too: two downloads to one destination may finish at once (in
        // different disk lanes) and must not write one temporary file.
        let temporary =
            "\(directory.isEmpty ? "." : directory)/.\(FilePath.lastComponent(of: destination))."
            + "\(FilePath.lastComponent(of: source)).haul-tmp"
        unlink(temporary)
        if let (code, path) = try copy(source, to: temporary) {
            unlink(temporary)
            // The copy's own failure (a read-only folder, a full disk), not the rename's EXDEV.
            throw DownloadError(
                code: .fileSystem,
                url: nil,
                errno: code,
                path: path == source ? source : destination,
                detail: path == source
                    ? "reading the finished file to copy it to its destination, on another file system, failed"
                    : "copying the finished file from the state directory, on another file system, failed; "
                        + "the partial file is kept"
            )
        }
        guard place(temporary, destination) == 0 else {
            let code = errno
            unlink(temporary)
            throw DownloadError(
                code: .fileSystem,
                url: nil,
                errno: code,
                path: destination,
                detail: "rename into place failed"
            )
        }
        unlink(source)
        return false
    }

    /// Copies the partial file at `source` to a new file at `target` (0600 until it is placed, with
    /// the mode a placed file gets and the source's times), synced. `nil`, or the failing call's
    /// `errno` and the path it was about.
    private static func copy(_ source: String, to target: String) throws(DownloadError) -> (Int32, String)? {
        let input = try PrivateFile.open(source, O_RDONLY)
        guard input >= 0 else { return (errno, source) }
        defer { close(input) }
        let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, FilePath.partialMode)
        guard output >= 0 else { return (errno, target) }
        defer { close(output) }
        var status = stat()
        guard fstat(input, &status) == 0 else { return (errno, source) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while true {
            let read = Glibc.read(input, buffer.baseAddress, buffer.count)
            if read < 0, errno == EINTR { continue }
            if read < 0 { return (errno, source) }
            if read == 0 { break }
            var written = 0
            do throws(DownloadError) {
                let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<read])
                try FileSink.write(bytes, to: output, at: offset, path: target, written: &written)
            } catch {
                return (error.errno ?? EIO, target)
            }
            offset += Int64(read)
        }
        fchmod(output, FilePath.placedMode)
        let times = [status.st_atim, status.st_mtim]
        _ = futimens(output, times)
        guard fsync(output) == 0 else { return (errno, target) }
        return nil
    }
}

/// A finished file's name: where it is moved, when the destination was chosen for the caller.
extension FinishJob {
    /// Moves the partial to `destination`, or where the name was chosen for the caller to the first
    /// free name: only Haul's own file is replaced there, and a file that appears at the name while
    /// the rename is made is kept too (no replacing rename then; the next free name is tried).
    /// Returns the name it took and whether it was a rename (not a copy across file systems). A
    /// hundred names taken, each as it was tried, fail it with the last one's error: the file stays
    /// a partial rather than be reported under a name another file holds.
    func renameIntoPlace() -> Result<(target: String, renamed: Bool), DownloadError> {
        var target = destination
        var replacing = true
        var attempt = 0
        while true {
            attempt += 1
            if case .ownOnly(let own) = replaces {
                (target, replacing) = freeName(ownModificationTime: own)
            }
            do throws(DownloadError) {
                return .success((target, try Self.moveIntoPlace(from: partialPath, to: target, replacing: replacing)))
            } catch {
                // Taken meanwhile: the next free name.
                if !replacing, error.errno == EEXIST, attempt < Self.freeNameAttempts { continue }
                var error = error
                error.url = url
                return .failure(error)
            }
        }
    }

    /// How many free names a placing tries when each is taken as it is tried.
    static let freeNameAttempts = 100

    /// `destination` when nothing is there or the file there is the one Haul placed for this
    /// download (then `replacing` it); else the first of `destination.1`, `destination.2`… where
    /// nothing is.
    func freeName(ownModificationTime: Double?) -> (name: String, replacing: Bool) {
        guard let existing = PlacedFile.at(destination) else { return (destination, false) }
        if let own = ownModificationTime, abs(existing.modificationTime - own) < 1e-6 { return (destination, true) }
        var status = stat()
        let name = FilePath.lastComponent(of: destination)
        let free = ServerFileName.firstFree(name, in: FilePath.directory(of: destination), first: 1) {
            lstat($0, &status) == 0
        }
        return (free ?? destination, free == nil)
    }
}
