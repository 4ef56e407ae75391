import FoundationEssentials
import Glibc
import HaulValues

/// Who has a state directory's journal open, and which of its rows each one runs.
///
/// Any number of managers, in one process or many, open a journal at once: each holds a shared
/// `flock` on the directory's `journal.lock` for as long as it is open, and an exclusive one on a
/// lock file of its own, `owner-<token>.lock`, whose token it writes on every row it queues or runs
/// (the `owner` column). A row's owner is alive while that file is locked; locks go with their
/// process however it ends, so a row whose owner's file is unlocked or gone belongs to a manager
/// that stopped or was killed, and the next manager that looks takes it back
/// (``Journal/releaseRowsOfGoneOwners()``). Tokens are never reused: an owner found gone stays gone.
///
/// An exclusive open (taking over a gone manager's folder, ``DownloadQueue/takeOver(_:from:)``)
/// takes `journal.lock` exclusively, which fails while any manager has the journal open; an older
/// Haul, which took it exclusively, and this one keep each other out as before.
struct JournalOwnership: ~Copyable {
    static let fileName = "journal.lock"
    static let ownerPrefix = "owner-"
    static let ownerSuffix = ".lock"

    /// This open's token: the `owner` of the rows it queues or runs. A random positive integer (an
    /// integer column keeps the queue's index as small as it was without owners).
    let token: Int64
    private let directoryLock: Int32
    private let ownerLock: Int32
    private let ownerPath: String

    /// Takes `directory`'s lock (shared, or `exclusive`) and a token of its own, or throws
    /// `.journalLocked` while the lock cannot be had (an exclusive holder, or any holder for an
    /// exclusive open).
    init(directory: String, journalPath: String, exclusive: Bool = false) throws(DownloadError) {
        let path = "\(directory)/\(Self.fileName)"
        let descriptor = try Self.openLockFile(path)
        guard flock(descriptor, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            if code == EWOULDBLOCK {
                throw DownloadError(code: .journalLocked, url: nil, path: journalPath, detail: "locked")
            }
            throw DownloadError(code: .fileSystem, url: nil, errno: code, path: path, detail: "flock failed")
        }
        var random = SystemRandomNumberGenerator()
        var token: Int64
        var ownerPath: String
        var ownerLock: Int32
        repeat {
            token = Int64.random(in: 1...Int64.max, using: &random)
            ownerPath = "\(directory)/\(Self.ownerPrefix)\(token)\(Self.ownerSuffix)"
            do throws(DownloadError) {
                ownerLock = try Self.openLockFile(ownerPath)
            } catch {
                flock(descriptor, LOCK_UN)
                Glibc.close(descriptor)
                throw error
            }
            // A new file: only a look at it (``isAlive(_:in:)``, for a moment) may hold it meanwhile,
            // or a sweep of gone owners' files (``removeGoneOwners(in:)``), which may unlink it
            // between the open and the lock: then another token is tried.
            while flock(ownerLock, LOCK_EX) != 0 && errno == EINTR {}
            if Self.isStillNamed(ownerLock, ownerPath) { break }
            Glibc.close(ownerLock)
        } while true
        self.token = token
        self.directoryLock = descriptor
        self.ownerLock = ownerLock
        self.ownerPath = ownerPath
    }

    private static func openLockFile(_ path: String) throws(DownloadError) -> Int32 {
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
        return descriptor
    }

    deinit {
        // Unlocked before it is closed: a child process forked meanwhile (to run another program)
        // holds the same open file until its exec, and a lock only closed would last as long.
        // The owner's file goes first: its rows are then seen as left, and nobody waits on a name
        // that is gone.
        unlink(ownerPath)
        flock(ownerLock, LOCK_UN)
        Glibc.close(ownerLock)
        flock(directoryLock, LOCK_UN)
        Glibc.close(directoryLock)
    }

    /// Whether `path` still names the file open as `descriptor`.
    private static func isStillNamed(_ descriptor: Int32, _ path: String) -> Bool {
        var open = stat()
        var named = stat()
        guard fstat(descriptor, &open) == 0, lstat(path, &named) == 0 else { return false }
        return open.st_ino == named.st_ino && open.st_dev == named.st_dev
    }

    /// Removes the lock files of owners that are gone (killed with no row left to them, whose files
    /// no row's release removed).
    static func removeGoneOwners(in directory: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasPrefix(ownerPrefix) && name.hasSuffix(ownerSuffix) {
            removeGone(String(name.dropFirst(ownerPrefix.count).dropLast(ownerSuffix.count)), in: directory)
        }
    }

    /// Whether a manager has `directory`'s journal open now: an owner's lock file is locked, or
    /// `journal.lock` is held exclusively (a take-over, an older Haul). Only looked at with shared
    /// locks and the owners' files: a look never takes `journal.lock` from a manager that opens it.
    static func isHeld(directory: String) -> Bool {
        let descriptor = open("\(directory)/\(fileName)", O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { Glibc.close(descriptor) }
        if flock(descriptor, LOCK_SH | LOCK_NB) != 0 { return errno == EWOULDBLOCK }
        flock(descriptor, LOCK_UN)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.contains { name in
            name.hasPrefix(ownerPrefix) && name.hasSuffix(ownerSuffix) && isLocked("\(directory)/\(name)")
        }
    }

    /// Whether the owner `token` of a row in `directory` still runs (its lock file is locked).
    static func isAlive(_ token: Int64, in directory: String) -> Bool {
        isLocked("\(directory)/\(ownerPrefix)\(token)\(ownerSuffix)")
    }

    /// Removes the lock file of an owner that is gone, if it is still gone once locked.
    static func removeGone(_ token: String, in directory: String) {
        let path = "\(directory)/\(ownerPrefix)\(token)\(ownerSuffix)"
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { Glibc.close(descriptor) }
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { unlink(path) }
    }

    /// Whether anyone holds a lock on the file at `path` (not blocking on a FIFO put there, nor
    /// following a link); a missing file is not locked.
    private static func isLocked(_ path: String) -> Bool {
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { Glibc.close(descriptor) }
        return flock(descriptor, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK
    }
}
