import CHaul
import Glibc
import HaulValues

/// The files Haul keeps in a state directory (partial files, the journal and its `-wal` and `-shm`,
/// the lock) and the state directory itself, opened so that nothing another user or program put
/// there is written through.
///
/// A state directory is private (0700, this user's); what is in it is still checked at every
/// open, because an older Haul, a copy, a shared folder or a hostile neighbour may have made it
/// otherwise. Each file is opened relative to a descriptor of its folder that was opened without
/// following a link (`openat`, `O_NOFOLLOW` at both steps) and is checked to be this user's: a
/// symbolic link in place of the folder or of the file is refused, never followed, and so is a
/// folder of someone else's put in its place. What was opened must then be a regular file of this
/// user with no other name (a hard link to someone's file would be truncated through it); a FIFO
/// opens without blocking (`O_NONBLOCK`) and is refused like a device. A file is truncated only
/// after these checks. Anything else is refused with ``DownloadError/Code-swift.struct/unsafeFile``,
/// left as it is.
package enum PrivateFile {
    /// Opens the file at `path` (in a state directory) with `flags` (`O_RDONLY`, `O_WRONLY`,
    /// `O_RDWR`; `O_CREAT` creates it 0600; `O_TRUNC` empties it once it is known to be Haul's).
    /// Returns the descriptor, or -1 with `errno` set when the file is missing (`ENOENT`) or cannot
    /// be opened; throws when what is there is not a file Haul may use.
    package static func open(_ path: String, _ flags: Int32) throws(DownloadError) -> Int32 {
        let folder = try openFolder(of: path)
        guard folder >= 0 else { return -1 }
        defer { Glibc.close(folder) }
        let name = FilePath.lastComponent(of: path)
        let descriptor = openat(
            folder,
            name,
            (flags & ~O_TRUNC) | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
            FilePath.partialMode
        )
        guard descriptor >= 0 else {
            let error = errno
            if error == ELOOP { throw unsafe(path, "a symbolic link, not a file Haul wrote") }
            // A FIFO without a reader, opened for writing without blocking.
            if error == ENXIO { throw unsafe(path, "a FIFO, not a file Haul wrote") }
            errno = error
            return -1
        }
        do throws(DownloadError) {
            try check(descriptor, path: path)
        } catch {
            Glibc.close(descriptor)
            throw error
        }
        // (O_NONBLOCK stays: a regular file ignores it.)
        if flags & O_TRUNC != 0, ftruncate(descriptor, 0) != 0 {
            let error = errno
            Glibc.close(descriptor)
            errno = error
            return -1
        }
        return descriptor
    }

    /// Checks the file at `path` (in a state directory) as ``open(_:_:)`` does and makes it private
    /// (0600) where others could read it, without opening it for reading or writing: through an
    /// `O_PATH` descriptor, whose closing leaves the process's POSIX locks on the file alone. For
    /// the journal's files: closing any other descriptor of one drops every lock the process holds
    /// on it, SQLite's included, and another process's SQLite then takes the WAL away from a journal
    /// this process has open (it found itself the last user). `creating`: a missing file is made
    /// first (0600, by `mknodat`, which opens nothing). `mapped`: a file mapped into memory (SQLite's
    /// WAL index), which, missing, is made on btrfs not copied on write (written in place: a full
    /// disk is then an error, not SIGBUS). Returns whether a file is there.
    package static func inspect(_ path: String, creating: Bool = false, mapped: Bool = false) throws(DownloadError)
        -> Bool
    {
        let folder = try openFolder(of: path)
        guard folder >= 0 else { return false }
        defer { Glibc.close(folder) }
        let name = FilePath.lastComponent(of: path)
        if creating { _ = mknodat(folder, name, S_IFREG | FilePath.partialMode, 0) }
        if mapped { _ = CHaul_create_without_copy_on_write(folder, name, UInt32(FilePath.partialMode)) }
        // With O_NOFOLLOW, O_PATH opens a link itself (no ELOOP), and the check refuses it.
        let descriptor = openat(folder, name, pathOnly | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { Glibc.close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return true }
        if status.st_mode & S_IFMT == S_IFDIR {
            // As an open for writing finds it: the caller's own open then says why (EISDIR).
            errno = EISDIR
            return false
        }
        try check(status, path: path)
        // fchmod refuses an O_PATH descriptor; its /proc name leads to the same file.
        if status.st_mode & 0o077 != 0 { chmod("/proc/self/fd/\(descriptor)", status.st_mode & 0o700) }
        return true
    }

    /// The folder of `path`, opened `O_PATH` without following a link and checked to be this
    /// user's; -1 with `errno` set when it cannot be opened.
    private static func openFolder(of path: String) throws(DownloadError) -> Int32 {
        let folderPath = FilePath.directory(of: path)
        let folder = Glibc.open(
            folderPath.isEmpty ? "." : folderPath,
            Self.pathOnly | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
        )
        guard folder >= 0 else {
            let error = errno
            if error == ENOTDIR || error == ELOOP {
                throw unsafe(
                    folderPath,
                    "not a folder but a symbolic link or a file, where the state directory should be"
                )
            }
            errno = error
            return -1
        }
        // The folder that was opened, whatever its path leads to now, must still be this user's: a
        // state directory swapped for another user's folder between two opens is not written in.
        var folderStatus = stat()
        if fstat(folder, &folderStatus) == 0, folderStatus.st_uid != geteuid() {
            Glibc.close(folder)
            throw unsafe(folderPath, "a folder of user \(folderStatus.st_uid), not this user's state directory")
        }
        return folder
    }

    /// `O_PATH` (Linux's value; Glibc shows it to `_GNU_SOURCE` only): a folder opened only to
    /// open files relative to it, with no read permission checked and nothing read.
    static let pathOnly: Int32 = 0o10000000

    /// Checks that `descriptor` is a regular file of this user with one name.
    static func check(_ descriptor: Int32, path: String) throws(DownloadError) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return }
        try check(status, path: path)
    }

    /// Checks that what `lstat` or `fstat` found at `path` is a regular file of this user with one
    /// name.
    static func check(_ status: stat, path: String) throws(DownloadError) {
        let kind = status.st_mode & S_IFMT
        guard kind == S_IFREG else {
            let what = kind == S_IFLNK ? "a symbolic link" : FilePath.kind(of: kind)
            throw unsafe(path, "\(what), not a file Haul wrote")
        }
        guard status.st_uid == geteuid() else {
            throw unsafe(path, "a file of user \(status.st_uid), not of this user (\(geteuid()))")
        }
        guard status.st_nlink <= 1 else {
            throw unsafe(path, "a file with \(status.st_nlink) names (a hard link to another file)")
        }
    }

    /// Checks the state directory at `path`, which exists: a folder (not a link to one) of this
    /// user, made private (0700) when others could read or enter it.
    package static func checkFolder(_ path: String) throws(DownloadError) {
        let folder = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard folder >= 0 else {
            let error = errno
            if error == ENOTDIR || error == ELOOP {
                var status = stat()
                let isLink = lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFLNK
                let what =
                    !isLink
                    ? FilePath.kind(of: status.st_mode & S_IFMT)
                    : status.st_uid == geteuid() ? "a symbolic link" : "a symbolic link of user \(status.st_uid)"
                throw unsafe(
                    path,
                    "\(what), not a folder: Haul keeps its state only in a real folder (name one with the "
                        + "state directory setting to keep it elsewhere)"
                )
            }
            throw DownloadError(
                code: .fileSystem,
                url: nil,
                errno: error,
                path: path,
                detail: "could not open the state directory"
            )
        }
        defer { Glibc.close(folder) }
        var status = stat()
        guard fstat(folder, &status) == 0 else { return }
        guard status.st_uid == geteuid() else {
            throw unsafe(
                path,
                "a folder of user \(status.st_uid): Haul keeps partial files only in a folder of this user "
                    + "(\(geteuid())), which nobody else can change"
            )
        }
        // One that existed already, readable by others (made by an older Haul, or by hand), is made
        // private.
        if status.st_mode & 0o077 != 0 { fchmod(folder, status.st_mode & 0o700) }
    }

    static func unsafe(_ path: String, _ what: String) -> DownloadError {
        var error = DownloadError(code: .unsafeFile, url: nil, path: path, detail: what)
        error.nothingKept = true
        return error
    }
}
