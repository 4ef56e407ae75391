import Foundation

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

/// Fills the file system of `folder` with a file until `bytes` are left free (at most; tmpfs counts
/// whole pages).
func fill(_ folder: URL, leaving bytes: Int) throws {
    var status = statvfs()
    guard statvfs(folder.path, &status) == 0 else { throw TestFailure("statvfs \(folder.path) failed") }
    let free = Int(status.f_bavail) * Int(status.f_frsize)
    let filler = folder.appendingPathComponent("filler")
    FileManager.default.createFile(atPath: filler.path, contents: Data(count: max(0, free - bytes)))
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
