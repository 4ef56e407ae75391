import FoundationEssentials
import Glibc

/// POSIX path pieces, as `dirname` and `basename` take them apart (without their special cases for
/// `/` and `..`, which no file Haul writes is called). A path's length is read in bytes, not in
/// characters: counting characters walks the whole path, per file on the disk lanes.
package enum FilePath {
    /// Everything before the last `/` (without trailing slashes), or "" for a bare name.
    package static func directory(of path: String) -> String {
        let trimmed = withoutTrailingSlash(path)
        guard let slash = trimmed.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        if slash == trimmed.startIndex { return "/" }
        return String(trimmed[..<slash])
    }

    /// Everything after the last `/` (ignoring trailing slashes).
    package static func lastComponent(of path: String) -> String {
        let trimmed = withoutTrailingSlash(path)
        guard let slash = trimmed.utf8.lastIndex(of: UInt8(ascii: "/")) else { return String(trimmed) }
        return String(trimmed[trimmed.utf8.index(after: slash)...])
    }

    /// `path` without one trailing `/`, unless it is the root. Found by byte: comparing Characters
    /// from the end (`lastIndex(of: "/")` on the String) was 1 % of the disk lane's time per file.
    private static func withoutTrailingSlash(_ path: String) -> Substring {
        guard path.utf8.count > 1, path.utf8.last == UInt8(ascii: "/") else { return path[...] }
        return path[..<path.utf8.index(before: path.utf8.endIndex)]
    }

    /// Creates `path` and every missing folder above it (`mkdir -p`): `nil`, or the `errno` of the
    /// first folder that could not be made. `path` itself gets `mode` when it is created here (the
    /// folders above it, the umask's default).
    package static func makeDirectories(_ path: String, mode: mode_t = 0o777) -> Int32? {
        if mkdir(path, mode) == 0 { return nil }
        var error = errno
        if error == EEXIST { return isDirectory(path) ? nil : ENOTDIR }
        guard error == ENOENT else { return error }
        let parent = directory(of: path)
        guard !parent.isEmpty, parent != path else { return error }
        if let parentError = makeDirectories(parent) { return parentError }
        if mkdir(path, mode) == 0 { return nil }
        error = errno
        return error == EEXIST && isDirectory(path) ? nil : error
    }

    /// Where the symbolic link at `path` leads, through every link of a chain (at most 40, as the
    /// kernel's `ELOOP`): a relative target is taken from the link's folder. `nil` when the chain
    /// loops or a link cannot be read. The target need not exist (a dangling link names the file to
    /// create). Call only for a path that `lstat` found to be a link.
    package static func linkTarget(of path: String) -> String? {
        var current = path
        for _ in 0..<40 {
            // EINVAL: not a link; ENOENT: nothing there (a dangling link's target). Either is the end.
            guard let target = readLink(current) else {
                return errno == EINVAL || errno == ENOENT ? canonicalFolder(of: current) : nil
            }
            if target.hasPrefix("/") {
                current = target
            } else {
                let folder = directory(of: current)
                current = folder.isEmpty ? target : (folder == "/" ? "/" : folder + "/") + target
            }
        }
        return nil
    }

    /// The descriptor of this process that `path` names through a chain of links (`/dev/stdout` →
    /// `/proc/self/fd/1`; `/dev/fd/N`; `/proc/self/fd/N`; `/proc/PID/fd/N` of this process), if any.
    package static func inheritedDescriptor(of path: String) -> Int32? {
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

    /// What the link at `path` holds (`readlink`), or `nil` with `errno` set.
    package static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `path` with its folder resolved by `realpath` (no `..`, no link in it: `a/link-to-dir/../b`
    /// is where the kernel finds it); as it is when the folder does not exist.
    private static func canonicalFolder(of path: String) -> String {
        let folder = directory(of: path)
        guard let resolved = realpath(folder.isEmpty ? "." : folder, nil) else { return path }
        defer { free(resolved) }
        let real = String(cString: resolved)
        return (real == "/" ? "" : real) + "/" + lastComponent(of: path)
    }

    /// What a file that is neither a regular file nor a folder is, in words.
    package static func kind(of mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFIFO: "a FIFO (named pipe)"
        case S_IFSOCK: "a socket"
        case S_IFDIR: "a folder"
        default: "not a regular file"
        }
    }

    /// The name of the state folder Haul keeps beside the files it places (by default).
    package static let stateFolderName = ".haul"

    /// The state directory of a destination in `folder` when none is configured: a `.haul` folder
    /// beside it (``DownloadManager/defaultStateDirectory(besideFolder:)``).
    package static func stateDirectory(besideFolder folder: String) -> String {
        let name = stateFolderName
        return folder.hasSuffix("/") ? "\(folder)\(name)" : "\(folder)/\(name)"
    }

    /// The mode of a partial file: its owner's only, as the bodies of authenticated downloads are.
    package static let partialMode: mode_t = 0o600

    /// The mode a finished file gets when it is placed: `0666` less the process's umask, as curl
    /// and wget create files (read once from `/proc/self/status`: `umask(2)` cannot be read without
    /// being set, which would race with other threads).
    package static let placedMode: mode_t = {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("Umask:") }
        let mask = line.flatMap { mode_t($0.dropFirst("Umask:".count).trimmingWhitespace, radix: 8) } ?? 0o022
        return 0o666 & ~mask
    }()

    /// The length of the regular file at `path` itself, or `nil` when there is none: a link there is
    /// not followed (every caller asks of a partial file, and a link put in its place is not one:
    /// its target's length would be taken for the download's bytes).
    package static func fileLength(_ path: String) -> Int64? {
        var status = stat()
        guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(status.st_size)
    }

    /// Whether `path` is a folder (through links).
    package static func isDirectory(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
    }

    /// `url.standardizedFileURL.path`, skipping Foundation's slow path for a path that is already
    /// absolute and plain (no `.`, `..` or empty components).
    package static func standardized(_ url: URL) -> String {
        let path = url.path
        return isPlainAbsolutePath(path) ? path : url.standardizedFileURL.path
    }

    /// Whether `path` starts with `/` and has no empty, `.` or `..` component (nor a trailing `/`).
    static func isPlainAbsolutePath(_ path: String) -> Bool {
        let slash = UInt8(ascii: "/")
        let dot = UInt8(ascii: ".")
        var bytes = path.utf8.makeIterator()
        guard bytes.next() == slash else { return false }
        var length = 0
        var onlyDots = true
        while true {
            let byte = bytes.next()
            if byte == nil || byte == slash {
                if length == 0 || (onlyDots && length <= 2) { return false }
                if byte == nil { return true }
                length = 0
                onlyDots = true
            } else {
                length += 1
                if byte != dot { onlyDots = false }
            }
        }
    }
}
