import Foundation

/// A tmpfs of `megabytes` MiB mounted at a new folder, for `body`; unmounted after (the tests run as
/// root, which the test command is).
func withSmallDisk<T>(megabytes: Int, _ body: (URL) async throws -> T) async throws -> T {
    let folder = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: folder) }
    let mount = try ChildProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", folder.path])
    guard mount.wait() == 0 else {
        throw TestFailure("could not mount a tmpfs at \(folder.path): the tests run as root (README)")
    }
    defer { _ = try? ChildProcess("/bin/umount", ["-l", folder.path]).wait() }
    return try await body(folder)
}
