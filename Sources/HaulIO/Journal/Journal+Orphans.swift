import CHaul
import FoundationEssentials
import Glibc
import HaulValues

/// Partial files found beside a journal that did not exist yet (a journal deleted, its partial files
/// kept): adopted by the downloads asked for again, the others removed at close.
extension Journal {
    /// The `*.part` files of `directory` and their lengths.
    static func partialFiles(in directory: String) -> [String: Int64] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var found: [String: Int64] = [:]
        for name in names where name.hasSuffix(".part") {
            guard let length = FilePath.fileLength("\(directory)/\(name)") else { continue }
            found[String(name.dropLast(5))] = length
        }
        return found
    }

    /// The length of a partial file this journal found without a row when it was created, once: a new
    /// row for `id` records it, so that the download resumes it, its bytes proven by the overlap
    /// its resume checks. Those no download of this open asked for are removed when it closes
    /// (``removeUnadoptedPartials()``). Call inside the journal (``Journal/confined(_:)``).
    package func adoptOrphanPartial(for id: DownloadID) -> Int64? {
        guard !orphanPartials.isEmpty else { return nil }
        return orphanPartials.removeValue(forKey: id.rawValue)
    }

    /// Removes the partial files this journal found without a row when it was created and that no
    /// download asked for since (a journal lost or moved away: the run after it continues what it is
    /// asked for again, and nobody else could). One that has a row now (another process asked for
    /// it) or changed length since is left. Call inside the journal (``Journal/confined(_:)``), before the database closes.
    func removeUnadoptedPartials() {
        guard !orphanPartials.isEmpty, database != nil else { return }
        for (id, length) in orphanPartials {
            let path = Self.partialPath(for: DownloadID(rawValue: id), in: directory)
            // (A journal that cannot be read now leaves the file.)
            guard hasRow(id) == false, FilePath.fileLength(path) == length else { continue }
            unlink(path)
        }
        orphanPartials = [:]
    }

    /// Whether a row has the id `id`; `nil` when it cannot be read. On the database itself, not
    /// through ``rows()``: ``close()`` calls it from `deinit`, when ``SQLiteRows``'s unowned reference
    /// to this journal can no longer be read (the process stopped with "Attempted to read an unowned
    /// reference but object … was already destroyed"). Call inside the journal (``Journal/confined(_:)``).
    private func hasRow(_ id: String) -> Bool? {
        guard let statement = try? prepared(.recordByID) else { return nil }
        defer { sqlite3_reset(statement) }
        Self.bind(statement, 1, id)
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: return nil
        }
    }
}
