import Glibc
import HaulValues

/// Placing a file whose name someone else wrote (``DownloadRequest/confinedTo``): its folder is
/// reached from the output folder one component at a time, so that a symbolic link planted on the
/// way after the name was checked is not followed, and the file is moved into that folder by its
/// descriptor (`/proc/self/fd/N/name`: the kernel walks no path again).
extension FinishJob {
    /// ``finish(_:synced:clock:recorded:)`` into the folder ``openConfinedFolder(of:under:)`` opens.
    func finishConfined(
        under root: String,
        _ staged: Staged,
        synced: Bool,
        clock: inout SyncClock,
        recorded: String?
    ) -> Result<PlacedFile, DownloadError> {
        let folder: Int32
        do {
            folder = try Self.openConfinedFolder(of: destination, under: root)
        } catch {
            close(staged.descriptor)  // (the partial file, if it has a name, stays)
            var error = error
            error.url = url
            return .failure(error)
        }
        defer { close(folder) }
        let byDescriptor = "/proc/self/fd/\(folder)"
        let realFolder = FilePath.directory(of: destination)
        var job = self
        job.destination = "\(byDescriptor)/\(FilePath.lastComponent(of: destination))"
        job.confinedTo = nil
        // What the caller is told names the folder as it was asked for, not the descriptor.
        let named = { (path: String) -> String in
            path.hasPrefix(byDescriptor + "/") ? realFolder + path.dropFirst(byDescriptor.count) : path
        }
        switch job.finish(staged, synced: synced, clock: &clock, recorded: recorded) {
        case .success(var placed):
            placed.path = placed.path.map(named)
            return .success(placed)
        case .failure(var error):
            error.path = error.path.map(named)
            return .failure(error)
        }
    }

    /// Opens (`O_PATH`) the folder of `destination`, which must be inside `root`, walking from `root`
    /// one component at a time: a missing folder is made there; a symbolic link is followed only
    /// when it is this user's and leads to a folder inside `root`; anything else is refused.
    static func openConfinedFolder(of destination: String, under root: String) throws(DownloadError) -> Int32 {
        let base = root.hasSuffix("/") ? root : root + "/"
        guard destination.hasPrefix(base) else {
            throw refused(destination, "not inside the output folder '\(root)'")
        }
        let flags = PrivateFile.pathOnly | O_DIRECTORY | O_CLOEXEC
        let rootFolder = open(root, flags)
        guard rootFolder >= 0 else { throw failure(root, "open the output folder") }
        var folder = rootFolder
        // The output folder stays open until the walk ends: where it is is resolved only when a link
        // on the way needs it (`realpath` of /proc/self/fd/N cost 8 `readlink`s for every file).
        var resolvedRoot: String??
        func inside() -> String? {
            if resolvedRoot == nil { resolvedRoot = realPath(of: rootFolder).map { $0 == "/" ? "/" : $0 + "/" } }
            return resolvedRoot!
        }
        /// Closes what the walk holds, on the way out with an error.
        func abandon(_ descriptors: Int32...) {
            for descriptor in Set(descriptors + [folder, rootFolder]) where descriptor >= 0 { close(descriptor) }
        }
        let relative = FilePath.directory(of: String(destination.dropFirst(base.count)))
        var walked = root
        for part in relative.split(separator: "/") where part != "." {
            let name = String(part)
            walked += "/" + name
            guard name != ".." else {
                abandon()
                throw refused(destination, "climbs out ('..')")
            }
            var next = openat(folder, name, flags | O_NOFOLLOW)
            if next < 0, errno == ENOENT, mkdirat(folder, name, 0o777) == 0 || errno == EEXIST {
                next = openat(folder, name, flags | O_NOFOLLOW)
            }
            if next < 0, errno == ELOOP || errno == ENOTDIR {
                var status = stat()
                if fstatat(folder, name, &status, AT_SYMLINK_NOFOLLOW) == 0, status.st_mode & S_IFMT == S_IFLNK {
                    guard status.st_uid == geteuid() else {
                        abandon()
                        throw refused(
                            walked,
                            "a symbolic link user \(status.st_uid) made on the way to the file (not followed)"
                        )
                    }
                    // The user's own link, followed while it leads inside the output folder.
                    next = openat(folder, name, flags)
                    if next >= 0, let inside = inside(), let target = realPath(of: next),
                        !(target + "/").hasPrefix(inside)
                    {
                        abandon(next)
                        throw refused(walked, "a symbolic link that leads out of the output folder (to '\(target)')")
                    }
                }
            }
            guard next >= 0 else {
                let error = failure(walked, "open a folder on the way to the file")
                abandon()
                throw error
            }
            if folder != rootFolder { close(folder) }
            folder = next
        }
        if folder != rootFolder { close(rootFolder) }
        return folder
    }

    /// A destination refused for `detail` (on the way to it, at `path`).
    private static func refused(_ path: String, _ detail: String) -> DownloadError {
        DownloadError(code: .unsupportedDestination, url: nil, path: path, detail: detail)
    }

    /// The path the descriptor `folder` stands for now.
    private static func realPath(of folder: Int32) -> String? {
        guard let resolved = realpath("/proc/self/fd/\(folder)", nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func failure(_ path: String, _ what: String) -> DownloadError {
        DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "could not \(what)")
    }
}
