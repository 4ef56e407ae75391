import Foundation
import Glibc

/// A tmpfs of `megabytes` MiB mounted at a new folder, for `body`; unmounted after (the tests run as
/// root, which the test command is).
func withSmallDisk<T>(megabytes: Int, _ body: (URL) async throws -> T) async throws -> T {
    let folder = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: folder) }
    let mount = try ChildProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", folder.path])
    guard await mount.exited() == 0 else {
        throw TestFailure("could not mount a tmpfs at \(folder.path): the tests run as root (README)")
    }
    defer { _ = try? ChildProcess("/bin/umount", ["-l", folder.path]).wait() }
    return try await body(folder)
}

/// An ext4 file system of `megabytes` MiB with 1 KiB blocks (what `mkfs.ext4` makes for a partition
/// under 512 MiB) and no blocks kept for root, loop-mounted at a new folder, for `body`. Unlike a
/// tmpfs, its blocks are smaller than a memory page. `inodes`: as few as that many files (mkfs rounds
/// it up to a group's worth).
func withSmallBlockDisk<T>(megabytes: Int, inodes: Int? = nil, _ body: (URL) async throws -> T) async throws -> T {
    let options = ["-q", "-F", "-b", "1024", "-m", "0"] + (inodes.map { ["-N", "\($0)"] } ?? [])
    return try await withLoopDisk(megabytes: megabytes, making: ["/sbin/mkfs.ext4"] + options, body)
}

/// A file system made by `making` (mkfs and its options; the image's path is added) in an image
/// file of `megabytes` MiB, loop-mounted at a new folder, for `body`; unmounted after.
func withLoopDisk<T>(megabytes: Int, making: [String], _ body: (URL) async throws -> T) async throws -> T {
    let work = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: work) }
    let image = work.appendingPathComponent("disk.img").path
    let folder = work.appendingPathComponent("disk")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let file = open(image, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard file >= 0 else { throw TestFailure("could not create \(image): errno \(errno)") }
    let sized = ftruncate(file, off_t(megabytes) * 1024 * 1024)
    close(file)
    guard sized == 0 else { throw TestFailure("could not size \(image): errno \(errno)") }
    let mkfs = try ChildProcess(making[0], Array(making.dropFirst()) + [image], stdout: "/dev/null")
    guard await mkfs.exited() == 0 else { throw TestFailure("\(making[0]) failed on \(image)") }
    let mount = try ChildProcess("/bin/mount", ["-o", "loop", image, folder.path])
    guard await mount.exited() == 0 else {
        throw TestFailure("could not loop-mount \(image): the tests run as root (README)")
    }
    defer { _ = try? ChildProcess("/bin/umount", ["-d", folder.path]).wait() }
    return try await body(folder)
}

/// Fills the file system of `folder` to its last block with a file named `filler`, then gives
/// `bytes` of it back (whole blocks).
func fillAll(_ folder: URL, thenFree bytes: Int) throws {
    let filler = folder.appendingPathComponent("filler").path
    let descriptor = open(filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else { throw TestFailure("could not create \(filler): errno \(errno)") }
    defer { close(descriptor) }
    let zeros = [UInt8](repeating: 0, count: 64 * 1024)
    var length = 0
    while true {
        let written = zeros.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written > 0 {
            length += written
            continue
        }
        guard written < 0, errno == ENOSPC else { throw TestFailure("filling \(filler) failed: errno \(errno)") }
        // The last blocks: a write of a whole buffer fails where a smaller one still fits.
        let small = zeros.withUnsafeBytes { write(descriptor, $0.baseAddress, 1024) }
        guard small > 0 else { break }
        length += small
    }
    guard fsync(descriptor) == 0, ftruncate(descriptor, off_t(max(0, length - bytes))) == 0,
        fsync(descriptor) == 0
    else {
        throw TestFailure("could not give space back from \(filler): errno \(errno)")
    }
}

/// Fills the file system of `folder` with a file named `filler` until `bytes` are left free (at
/// most; tmpfs counts whole pages); ``unfill(_:)`` gives it back. It is written through a
/// close-on-exec descriptor: `FileManager`'s is not, and a `mount` another test started in that
/// moment kept the removed filler, and its space, while it ran.
func fill(_ folder: URL, leaving bytes: Int) throws {
    var status = statvfs()
    guard statvfs(folder.path, &status) == 0 else { throw TestFailure("statvfs \(folder.path) failed") }
    let free = Int(status.f_bavail) * Int(status.f_frsize)
    let filler = folder.appendingPathComponent("filler")
    let descriptor = open(filler.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else { throw TestFailure("could not create \(filler.path): errno \(errno)") }
    defer { close(descriptor) }
    let zeros = [UInt8](repeating: 0, count: 64 * 1024)
    var left = max(0, free - bytes)
    while left > 0 {
        let written = zeros.withUnsafeBytes { write(descriptor, $0.baseAddress, min(left, $0.count)) }
        guard written > 0 else { break }  // the disk is full: as far as it goes
        left -= written
    }
    guard statvfs(folder.path, &status) == 0, Int(status.f_bavail) * Int(status.f_frsize) <= bytes + 8192 else {
        throw TestFailure("could not fill \(folder.path)")
    }
}

/// The file at `path` made read-only for everyone, root included, as on a read-only file system (a
/// read-only bind mount of the file over itself), for `body`.
func withReadOnlyFile<T>(_ path: String, _ body: () async throws -> T) async throws -> T {
    guard try await ChildProcess("/bin/mount", ["--bind", path, path]).exited() == 0,
        try await ChildProcess("/bin/mount", ["-o", "remount,ro,bind", path, path]).exited() == 0
    else { throw TestFailure("could not bind-mount \(path) read-only: the tests run as root (README)") }
    defer { _ = try? ChildProcess("/bin/umount", [path]).wait() }
    return try await body()
}

/// Gives back the space ``fill(_:leaving:)`` took, at once: the filler is emptied before it is
/// removed, since a child process another test spawns while the filler is open holds it (until its
/// `exec` closes what it inherited) and a removed file's space returns only when the last holder
/// lets go.
func unfill(_ folder: URL) throws {
    let filler = folder.appendingPathComponent("filler").path
    guard truncate(filler, 0) == 0 else { throw TestFailure("could not empty \(filler): errno \(errno)") }
    try FileManager.default.removeItem(atPath: filler)
}
