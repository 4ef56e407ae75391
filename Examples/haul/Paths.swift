import Glibc

/// The command's own path helpers (it builds against Haul's public API only, as any program would):
/// `mkdir -p`, links followed to their end, and what a special file is, in words.
enum Paths {
    /// Everything after the last `/` (ignoring one trailing `/`).
    static func lastComponent(of path: String) -> String {
        let trimmed = path.utf8.count > 1 && path.hasSuffix("/") ? path.dropLast() : path[...]
        guard let slash = trimmed.lastIndex(of: "/") else { return String(trimmed) }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// Everything before the last `/` (ignoring one trailing `/`), `/` for the root, "" for a name.
    static func directory(of path: String) -> String {
        let trimmed = path.utf8.count > 1 && path.hasSuffix("/") ? path.dropLast() : path[...]
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }

    /// Whether `path` is a folder (through links).
    static func isDirectory(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
    }

    /// `mkdir -p`: `nil`, or the `errno` of the first folder that could not be made.
    static func makeDirectories(_ path: String) -> Int32? {
        if mkdir(path, 0o777) == 0 { return nil }
        let error = errno
        if error == EEXIST { return isDirectory(path) ? nil : ENOTDIR }
        let parent = directory(of: path)
        guard error == ENOENT, !parent.isEmpty, parent != path else { return error }
        if let parentError = makeDirectories(parent) { return parentError }
        if mkdir(path, 0o777) == 0 { return nil }
        return errno == EEXIST && isDirectory(path) ? nil : errno
    }

    /// Where the symbolic link at `path` leads through every link of a chain (at most 40, the
    /// kernel's `ELOOP`), its folder resolved; the end need not exist (a dangling link names the
    /// file to create). `nil` when the chain loops or a link cannot be read.
    static func linkTarget(of path: String) -> String? {
        var current = path
        for _ in 0..<40 {
            guard let target = readLink(current) else {
                guard errno == EINVAL || errno == ENOENT else { return nil }
                let folder = directory(of: current)
                guard let resolved = realpath(folder.isEmpty ? "." : folder, nil) else { return current }
                defer { free(resolved) }
                let real = String(cString: resolved)
                return (real == "/" ? "" : real) + "/" + lastComponent(of: current)
            }
            let folder = directory(of: current)
            current =
                target.hasPrefix("/") || folder.isEmpty ? target : (folder == "/" ? "/" : folder + "/") + target
        }
        return nil
    }

    /// The descriptor of this process that `path` names through links (`/dev/stdout` →
    /// `/proc/self/fd/1`, `/dev/fd/N`, `/proc/PID/fd/N` of this process), if any.
    static func inheritedDescriptor(of path: String) -> Int32? {
        let own = ["/proc/self/fd/", "/dev/fd/", "/proc/\(getpid())/fd/"]
        var current = path
        for _ in 0..<40 {
            for prefix in own where current.hasPrefix(prefix) {
                if let number = Int32(current.dropFirst(prefix.count)) { return number }
            }
            guard let target = readLink(current), target.hasPrefix("/") else { return nil }
            current = target
        }
        return nil
    }

    /// What the link at `path` holds, or `nil` with `errno` set.
    private static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// What a file that is neither a regular file nor a folder is, in words.
    static func kind(of mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFIFO: "a FIFO (named pipe)"
        case S_IFSOCK: "a socket"
        case S_IFDIR: "a folder"
        default: "not a regular file"
        }
    }
}
