import Glibc

/// The kernel's rule for links and FIFOs in shared folders, applied by Haul whatever the machine's
/// setting: in a folder that is sticky and writable by all (`/tmp`, `/var/tmp`), a symbolic link is
/// followed, and a FIFO opened, only when it belongs to the user running Haul or to the folder's
/// owner (`fs.protected_symlinks=1`, `fs.protected_fifos=1`). Otherwise another user who planted one
/// at a name Haul is told to write (`haul -o /tmp/report.bin`, run by root) would have Haul
/// overwrite the file the link leads to, or hand the download to the FIFO's reader. Where the kernel
/// has the rule on, it refuses these itself; where it is off (a container, an older distribution),
/// Haul must. Writing through one's own links, devices and FIFOs stays allowed.
package enum SharedFolderRule {
    /// The first entry on the way to `path` that the rule refuses: a link in a shared folder, or the
    /// FIFO `path` names in one, owned neither by `user` nor by that folder's owner; `nil` when there
    /// is none (or the path stops resolving: what is missing is made by Haul, not followed). `user`:
    /// the process's effective user when `nil`, asked only when a link or FIFO is met (one system
    /// call less per download in the common case of none).
    package static func refusal(for path: String, user: uid_t? = nil) -> Refusal? {
        var folders = KnownFolders()
        return refusal(for: path, user: user, folders: &folders)
    }

    /// ``refusal(for:user:)`` for one of many paths checked at once (an `enqueue`): a folder whose
    /// way was walked for an earlier path of the same call, every entry on it there and none
    /// refused, is not walked again; only the entries after it are (most lists put every file in
    /// one folder: its way was a `lstat` per component for each file, and 5 % of a 10,000-file
    /// list's CPU). What a later entry would make of a folder walked before is what it could make
    /// of it between the check and the open anyway.
    package static func refusal(for path: String, user: uid_t? = nil, folders: inout KnownFolders) -> Refusal? {
        folders.leaf = nil
        let folder = FilePath.directory(of: path)
        let leaf = path.hasSuffix("/") ? nil : FilePath.lastComponent(of: path)
        guard path.hasPrefix("/"), let leaf, !leaf.isEmpty, leaf != ".", leaf != ".." else {
            // A relative path (the current folder may change between two calls), or one whose last
            // component is not a name: walked whole.
            var links = 0
            return walk(
                components(of: path),
                from: path.hasPrefix("/") ? "" : currentFolder(),
                user: user,
                links: &links
            )
            .refusal
        }
        var links = 0
        var resolved = folders.resolved[folder]
        if resolved == nil {
            switch walk(components(of: folder), from: "", user: user, links: &links, isWhole: false) {
            case .refused(let refusal): return refusal
            case .missing: return nil
            case .resolved(let path):
                resolved = path
                if folders.resolved.count < KnownFolders.limit { folders.resolved[folder] = path }
            }
        }
        var entry: Entry? = nil
        let end = walk([leaf], from: resolved ?? "", user: user, links: &links, entry: &entry)
        folders.leaf = entry.map { (path, $0) }
        return end.refusal
    }

    /// What the walk found at a path's own last entry, not followed (its `lstat`): the caller looks
    /// at it there rather than again.
    package enum Entry {
        case found(stat)
        case missing(errno: Int32)
    }

    /// Folders walked without a refusal, every entry on their way there, and where they led
    /// (links followed): kept for one call that checks many paths.
    package struct KnownFolders {
        static let limit = 1024
        var resolved: [String: String] = [:]
        /// The last path checked, and its own entry as the walk found it (``Entry``); `nil` when the
        /// walk stopped before it.
        package var leaf: (path: String, entry: Entry)?

        package init() {}
    }

    /// Where a walk ended: at an entry the rule refuses, at one that does not exist (what is missing
    /// is made by Haul, not followed), or at the resolved path (no link left in it).
    private enum WalkEnd {
        case refused(Refusal)
        case missing
        case resolved(String)

        var refusal: Refusal? {
            if case .refused(let refusal) = self { return refusal }
            return nil
        }
    }

    /// Walks `pending` from the folder `resolved` (`""` for the root), following links; `isWhole`:
    /// the components end the path, so a FIFO at the end is checked.
    private static func walk(
        _ pending: [String],
        from resolved: String,
        user: uid_t?,
        links: inout Int,
        isWhole: Bool = true
    ) -> WalkEnd {
        var entry: Entry? = nil
        return walk(pending, from: resolved, user: user, links: &links, isWhole: isWhole, entry: &entry)
    }

    /// ``walk(_:from:user:links:isWhole:)``, with what its first look found (`entry`).
    private static func walk(
        _ pending: [String],
        from resolved: String,
        user: uid_t?,
        links: inout Int,
        isWhole: Bool = true,
        entry: inout Entry?
    ) -> WalkEnd {
        var pending = pending[...]
        var resolved = resolved
        var first = true
        while let component = pending.popFirst() {
            if component.isEmpty || component == "." { continue }
            if component == ".." {
                resolved = FilePath.directory(of: resolved.isEmpty ? "/" : resolved)
                if resolved == "/" { resolved = "" }
                continue
            }
            // One allocation: `resolved + "/" + component` made two, and a String handed straight to
            // lstat a third (a copy), for each file of an `enqueue`.
            var candidate = resolved
            candidate.reserveCapacity(resolved.utf8.count + 1 + component.utf8.count)
            candidate += "/"
            candidate += component
            var status = stat()
            let found = candidate.withCString { lstat($0, &status) } == 0
            if first {
                entry = found ? .found(status) : .missing(errno: errno)
                first = false
            }
            guard found else { return .missing }
            let kind = status.st_mode & S_IFMT
            if kind == S_IFLNK {
                links += 1
                guard links <= 40 else { return .missing }  // ELOOP: the open that follows says so
                if let refusal = check(candidate, owner: status.st_uid, in: resolved, user: user, kind: .link) {
                    return .refused(refusal)
                }
                guard let target = FilePath.readLink(candidate) else { return .missing }
                if target.hasPrefix("/") { resolved = "" }
                pending = (components(of: target) + pending)[...]
                continue
            }
            if kind == S_IFIFO, isWhole, pending.allSatisfy({ $0.isEmpty || $0 == "." }),
                let refusal = check(candidate, owner: status.st_uid, in: resolved, user: user, kind: .fifo)
            {
                return .refused(refusal)
            }
            resolved = candidate
        }
        return .resolved(resolved)
    }

    /// A link or FIFO the rule refuses: where it is, whose it is, and the sentence that says why.
    package struct Refusal: Equatable, Sendable {
        package enum Kind: Sendable { case link, fifo }
        package var path: String
        package var kind: Kind
        package var owner: uid_t
        package var folder: String

        /// Why it is refused, to follow "'PATH' is ".
        package var detail: String {
            let what = kind == .link ? "a symbolic link" : "a FIFO (named pipe)"
            let verb = kind == .link ? "follow" : "write to"
            return "\(what) owned by another user (uid \(owner)) in the shared folder '\(folder)' (sticky and "
                + "writable by all), which Haul does not \(verb): whoever put it there chose where the download "
                + "would go (the kernel's fs.protected_\(kind == .link ? "symlinks" : "fifos") rule)"
        }
    }

    private static func check(
        _ path: String,
        owner: uid_t,
        in folder: String,
        user: uid_t?,
        kind: Refusal.Kind
    ) -> Refusal? {
        let folder = folder.isEmpty ? "/" : folder
        var status = stat()
        guard stat(folder, &status) == 0 else { return nil }
        let shared = status.st_mode & (S_ISVTX | S_IWOTH) == S_ISVTX | S_IWOTH
        guard shared, owner != (user ?? geteuid()), owner != status.st_uid else { return nil }
        return Refusal(path: path, kind: kind, owner: owner, folder: folder)
    }

    private static func components(of path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    private static func currentFolder() -> String {
        guard let folder = getcwd(nil, 0) else { return "" }
        defer { free(folder) }
        let path = String(cString: folder)
        return path == "/" ? "" : path
    }
}
