import FoundationEssentials
import Glibc
import HaulIO
import HaulScheduler
import HaulValues

/// Giving paused downloads to another manager while this one runs (a fleet worker whose lease was
/// taken): their rows and partial files move into a state directory no manager has open, where the
/// other's ``DownloadManager/takeOver(_:from:)`` finds them.
extension DownloadQueue {
    /// See ``DownloadManager/handOver(_:to:)``.
    func handOver(_ ids: [HaulValues.DownloadID], to directory: URL) throws(HaulValues.DownloadError) -> [HaulValues
        .DownloadID:
        Int64]
    {
        let target = FilePath.standardized(directory)
        guard !ids.isEmpty else { return [:] }
        if let error = FilePath.makeDirectories(target, mode: 0o700) {
            throw HaulValues.DownloadError(
                code: .fileSystem,
                url: nil,
                errno: error,
                path: target,
                detail: "could not create the folder to hand downloads over in"
            )
        }
        try PrivateFile.checkFolder(target)
        return try Self.whileTakingOver(target) {
            () throws(HaulValues.DownloadError) -> [HaulValues.DownloadID: Int64] in
            // Exclusively: `.journalLocked` while a manager runs on it (it is not a hand-over folder).
            let other = try Journal(directory: target, exclusive: true)
            defer { other.close() }
            var handed: [HaulValues.DownloadID: Int64] = [:]
            // Out of each of this manager's journals, by the loop: one transaction each.
            for directory in catalog.openJournals.map(\.directory) where directory != target {
                let left = ids.filter { handed[$0] == nil }
                guard !left.isEmpty else { break }
                let moved = try onLoop(directory) { [self] writing, reply throws(HaulValues.DownloadError) in
                    let journal = writing.journal
                    var moved: [HaulValues.DownloadID: Int64] = [:]
                    for id in left {
                        guard let record = try journal.record(for: id), record.state == .paused,
                            !journal.isOwnedByAnother(id)
                        else { continue }
                        // Moved before the row goes: a reader that finds the row gone finds it there.
                        moved[id] = try move(id, record: record, from: journal, into: other) ?? 0
                        journal.remove(id)
                        if let handle = catalog.existingHandle(id) { inbox.submit(.control(handle, .handedOver)) }
                    }
                    reply.set(moved)
                }
                handed.merge(moved) { first, _ in first }
            }
            return handed
        }
    }

    /// See ``DownloadManager/removeDownloads(_:stateDirectory:)``.
    static func removeDownloads(_ ids: [HaulValues.DownloadID], in directory: URL) throws(HaulValues.DownloadError)
        -> Int
    {
        let source = FilePath.standardized(directory)
        guard !ids.isEmpty, access("\(source)/\(Journal.fileName)", F_OK) == 0 else { return 0 }
        return try whileTakingOver(source) { () throws(HaulValues.DownloadError) -> Int in
            let journal = try Journal(directory: source, exclusive: true)
            defer { journal.close() }
            var removed = 0
            for id in ids where try journal.record(for: id) != nil {
                journal.remove(id)
                removed += 1
            }
            return removed
        }
    }
}
