import Glibc

/// Small string and path helpers that Foundation's `NSString` and `CharacterSet` used to provide:
/// Haul links FoundationEssentials only (the whole of Foundation, with ICU, added about 6 MB of
/// resident memory to every process that uses Haul).
extension StringProtocol {
    /// Without leading and trailing spaces, tabs, carriage returns and line feeds.
    var trimmingWhitespace: String {
        func isSpace(_ character: Character) -> Bool {
            character == " " || character == "\t" || character == "\r" || character == "\n" || character == "\r\n"
        }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return String(self[first...last])
    }
}

/// POSIX path pieces, as `dirname` and `basename` take them apart (without their special cases for
/// `/` and `..`, which no file Haul writes is called).
enum FilePath {
    /// Everything before the last `/` (without trailing slashes), or "" for a bare name.
    static func directory(of path: String) -> String {
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        if slash == trimmed.startIndex { return "/" }
        return String(trimmed[..<slash])
    }

    /// Everything after the last `/` (ignoring trailing slashes).
    static func lastComponent(of path: String) -> String {
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        guard let slash = trimmed.lastIndex(of: "/") else { return trimmed }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// Creates `path` and every missing folder above it (`mkdir -p`): `nil`, or the `errno` of the
    /// first folder that could not be made.
    static func makeDirectories(_ path: String) -> Int32? {
        if mkdir(path, 0o777) == 0 { return nil }
        var error = errno
        if error == EEXIST { return isDirectory(path) ? nil : ENOTDIR }
        guard error == ENOENT else { return error }
        let parent = directory(of: path)
        guard !parent.isEmpty, parent != path else { return error }
        if let parentError = makeDirectories(parent) { return parentError }
        if mkdir(path, 0o777) == 0 { return nil }
        error = errno
        return error == EEXIST && isDirectory(path) ? nil : error
    }

    private static func isDirectory(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
    }
}
