import Glibc

/// A finished file as the disk thread left it at its destination.
package struct PlacedFile: Equatable, Sendable {
    /// Its length in bytes.
    package var length: Int64
    /// Its modification time (seconds since 1970, with the nanoseconds), read after it was placed:
    /// with the length, what tells later whether the file is still the one Haul placed.
    package var modificationTime: Double
    /// Where it was placed, when not at the path asked for (a download that took its name from the
    /// server found someone else's file at it).
    package var path: String? = nil

    package init(length: Int64, modificationTime: Double, path: String? = nil) {
        self.length = length
        self.modificationTime = modificationTime
        self.path = path
    }

    /// The file at `path`, or `nil` when there is none.
    package static func at(_ path: String) -> PlacedFile? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return PlacedFile(length: Int64(status.st_size), modificationTime: modificationTime(of: status))
    }

    /// Whether `path` holds the file Haul placed there: the same length and, when recorded, the
    /// same modification time (rows from before Haul recorded it compare the length only).
    package static func isIntact(_ path: String, length: Int64?, modificationTime: Double?) -> Bool {
        isIntact(at(path), length: length, modificationTime: modificationTime)
    }

    /// Whether `file` (what a path held when looked at, `nil` for nothing) is the file Haul placed.
    package static func isIntact(_ file: PlacedFile?, length: Int64?, modificationTime: Double?) -> Bool {
        guard let length, let file, file.length == length else { return false }
        // Within a microsecond: a time that went through `Date` may differ in its last bits.
        return modificationTime.map { abs($0 - file.modificationTime) < 1e-6 } ?? true
    }

    /// Which file `status` describes, as the journal records it: its device and inode, which a
    /// rename (or a link of a nameless file) keeps.
    package static func identity(of status: stat) -> String { "\(status.st_dev):\(status.st_ino)" }

    /// The path that holds the file `identity` names: `destination`, or with `numbered` (a name
    /// chosen for the caller, which moves on to `name.1`, `name.2`… past files that are not
    /// Haul's) the first of those that does, looked for up to the first free name. `nil` when none
    /// does: the file was not placed, or was replaced since.
    package static func find(_ identity: String, at destination: String, numbered: Bool) -> String? {
        var status = stat()
        let holds = { (path: String) -> Bool in
            lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG && Self.identity(of: status) == identity
        }
        if holds(destination) { return destination }
        guard numbered else { return nil }
        var found: String?
        _ = ServerFileName.firstFree(
            FilePath.lastComponent(of: destination),
            in: FilePath.directory(of: destination),
            first: 1
        ) { path in
            if holds(path) { found = path }
            return found == nil && lstat(path, &status) == 0
        }
        return found
    }

    package static func modificationTime(of status: stat) -> Double {
        Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9
    }
}
