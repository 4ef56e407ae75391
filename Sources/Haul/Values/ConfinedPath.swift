import Glibc
import HaulValues

/// The rule for a path that someone other than the user who runs Haul may have written: a shared
/// queue's row, an input file's `out=`, `-o` of a list queued for a fleet. Such a path names a file
/// inside an output folder and must stay there: relative, no `..`, nothing in a state folder (the
/// journal and the partial files are Haul's, not a destination), no link that exists now leading
/// out of the folder, and no link at all that another user made (in a shared folder, anyone may
/// plant one).
///
/// ``DownloadRequest/confinedTo`` holds a download to this rule when its file is placed; these
/// checks let a caller refuse such a path before it queues anything (an input file's line, a
/// shared queue's row), with the reason in words.
public enum ConfinedPath {
    /// The name of the state folder Haul keeps beside the files it places (by default,
    /// ``DownloadManager/defaultStateDirectory(besideFolder:)``).
    public static let stateFolderName = FilePath.stateFolderName

    /// Why `path` cannot name a file inside an output folder, by its text alone, or `nil`: it is
    /// empty, absolute, climbs out with `..`, is inside a state folder, or names the folder itself.
    public static func refusal(_ path: String) -> String? {
        if path.isEmpty { return "is empty" }
        if path.utf8.first == UInt8(ascii: "/") {
            return "is an absolute path, where a path inside the output folder is needed"
        }
        let parts = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
        if parts.contains(where: { $0.elementsEqual("..".utf8) }) {
            return "climbs out of the output folder ('..')"
        }
        if parts.contains(where: { $0.elementsEqual(stateFolderName.utf8) }) {
            return "is inside a state folder ('\(stateFolderName)'), which holds Haul's journal and partial files"
        }
        if parts.allSatisfy({ $0.elementsEqual(".".utf8) }) { return "names the output folder itself" }
        return nil
    }

    /// Why `path` (inside `folder` by ``refusal(_:)``) leads out of `folder` through a symbolic link
    /// that exists now (a folder on its way, or the file itself), or through a link another user
    /// made, or `nil`. `stateDirectory`: a state folder configured inside `folder`, which the file
    /// may not be in either.
    public static func escape(_ path: String, in folder: String, stateDirectory: String? = nil) -> String? {
        guard let root = resolved(folder) else { return nil }  // no folder yet: no link in it either
        return escape(path, inResolved: root, stateDirectory: stateDirectory)
    }

    /// Where `folder` is (``escape(_:in:stateDirectory:)``'s first step: `realpath`, a `readlink`
    /// per component), for a caller that checks many paths in one folder; `nil` when it does not
    /// exist yet.
    public static func resolved(_ folder: String) -> String? { realPath(folder) }

    /// ``escape(_:in:stateDirectory:)`` in a folder resolved already (``resolved(_:)``).
    public static func escape(_ path: String, inResolved root: String, stateDirectory: String? = nil) -> String? {
        var resolved = root
        var parts = path.split(separator: "/").map(String.init).filter { $0 != "." }
        var hops = 0
        while !parts.isEmpty {
            let part = parts.removeFirst()
            let next = resolved == "/" ? "/\(part)" : "\(resolved)/\(part)"
            var status = stat()
            guard lstat(next, &status) == 0 else {
                // Nothing there yet: the rest is made inside what is resolved so far.
                resolved = next
                continue
            }
            if status.st_mode & S_IFMT == S_IFLNK {
                guard status.st_uid == geteuid() else {
                    return "leads through the symbolic link '\(next)', which user \(status.st_uid) made, not this user"
                }
                hops += 1
                guard hops <= 40, let target = realPath(FilePath.linkTarget(of: next) ?? "") else {
                    return "leads through the link '\(next)', which cannot be followed"
                }
                resolved = target
            } else {
                resolved = next
            }
        }
        let inside = resolved == root || resolved.hasPrefix(root == "/" ? "/" : root + "/")
        if !inside { return "leads out of the output folder through a symbolic link (to '\(resolved)')" }
        if let stateDirectory, let state = realPath(stateDirectory),
            resolved == state || resolved.hasPrefix(state + "/")
        {
            return "is inside the state directory '\(stateDirectory)'"
        }
        return nil
    }

    /// `realpath(3)` of what exists of `path`: its deepest existing folder resolved, the rest as it is.
    private static func realPath(_ path: String) -> String? {
        guard !path.isEmpty else { return nil }
        if let resolved = realpath(path, nil) {
            defer { free(resolved) }
            return String(cString: resolved)
        }
        let parent = FilePath.directory(of: path)
        guard !parent.isEmpty, parent != path, let base = realPath(parent) else { return nil }
        return (base == "/" ? "" : base) + "/" + FilePath.lastComponent(of: path)
    }
}
