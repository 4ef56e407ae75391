import Glibc

/// Which process owns a state directory: an exclusive `flock` on its `journal.lock`, held while a
/// ``Journal`` is open. Only one manager at a time writes a journal; readers (a listing during a run)
/// open the database read-only and need no lock, which SQLite's exclusive locking mode would deny
/// them. The lock goes with the process, however it ends.
struct JournalOwnership: ~Copyable {
    static let fileName = "journal.lock"

    private let descriptor: Int32

    /// Takes the lock of `directory`, or throws `.journalLocked` while another manager (in this
    /// process or another) holds it.
    init(directory: String, journalPath: String) throws(DownloadError) {
        let path = "\(directory)/\(Self.fileName)"
        let descriptor = try PrivateFile.open(path, O_RDWR | O_CREAT)
        guard descriptor >= 0 else {
            var error = DownloadError(
                code: .fileSystem,
                url: nil,
                errno: errno,
                path: path,
                detail: "could not open the journal's lock"
            )
            error.nothingKept = true
            throw error
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            if code == EWOULDBLOCK {
                throw DownloadError(code: .journalLocked, url: nil, path: journalPath, detail: "locked")
            }
            throw DownloadError(code: .fileSystem, url: nil, errno: code, path: path, detail: "flock failed")
        }
        self.descriptor = descriptor
    }

    deinit {
        // Unlocked before it is closed: a child process forked meanwhile (to run another program)
        // holds the same open file until its exec, and a lock only closed would last as long.
        flock(descriptor, LOCK_UN)
        Glibc.close(descriptor)
    }

    /// Whether a manager owns `directory` now (its lock is held).
    static func isHeld(directory: String) -> Bool {
        // Not blocking on a FIFO put there, nor following a link.
        let descriptor = open("\(directory)/\(fileName)", O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { Glibc.close(descriptor) }
        return flock(descriptor, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK
    }
}
