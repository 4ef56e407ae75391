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
