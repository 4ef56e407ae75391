import CHaul
import HaulValues

/// The loop thread's row writes that no commit has made durable yet.
///
/// The loop commits a turn's writes at its end (``WriteBatch``). When that commit fails (the disk is
/// full, or SQLite rolled the transaction back after a write it could not make), the loop has moved
/// on: a download it claimed runs, one it finished is in place. The journal then holds rows older
/// than the loop's, never newer: it keeps the last write of each row and makes them again first in
/// the next transaction the loop opens (before anything reads the queue in it), until a commit
/// takes them. Until then, readers on other threads see the older rows, which promise no byte the
/// disk does not hold (a finished file was recorded before it was placed:
/// ``recordPlacings(_:)``).
extension Journal {
    /// A row write of the loop thread, kept until a commit makes it durable.
    enum UnwrittenRow {
        /// The whole row as written (an update, a save or a claim's).
        case row(JournalRow)
        /// Only the bytes known durable were raised.
        case synced(Int64)
        /// The row was removed.
        case removed
    }

    /// Keeps `write` as `id`'s last write of the loop's open transaction. Call inside the journal (``Journal/confined(_:)``).
    func remember(_ id: DownloadID, _ write: UnwrittenRow) {
        guard batchOpen else { return }
        switch (write, unwritten[id]) {
        case (.synced(let bytes), .row(var record)?):
            record.bytesSynced = max(record.bytesSynced, bytes)
            unwritten[id] = .row(record)
        case (.synced(let bytes), .synced(let earlier)?):
            unwritten[id] = .synced(max(bytes, earlier))
        default:
            unwritten[id] = write
        }
    }

    /// A write in the loop's transaction failed: if SQLite rolled the whole transaction back (as it
    /// may on a full disk or an I/O error), the turn's earlier writes are gone too, and the writes
    /// that follow in this turn open a new transaction that makes them again first. Call inside the journal (``Journal/confined(_:)``).
    func noteIfBatchRolledBack(_ error: DownloadError) {
        guard batchOpen, database != nil, !isInTransaction else { return }
        batchOpen = false
        lostCommit = true
        answerCommitWaiters(error)
        if deferredCommitError == nil { deferredCommitError = error }
        confinement.leave()  // the hold `joinBatch()` took for the transaction
    }

    /// Makes the unwritten rows again, in the transaction just opened. A write that fails leaves
    /// them to the next transaction (the commit will most likely fail too).
    func rewriteUnwritten() {
        lostCommit = false
        guard let rows = try? rows() else { return }
        for (id, write) in unwritten {
            do {
                switch write {
                case .row(let record): try rows.save(record, for: id)
                case .synced(let bytes): try rows.recordSynced(id, bytes: bytes)
                case .removed: try rows.remove(id)
                }
            } catch {
                lostCommit = true
                noteIfBatchRolledBack(error)
                return
            }
        }
    }

    /// At close, a last try to make the unwritten rows durable (space may have come back). Call
    /// inside the journal, the loop's transaction ended.
    func writeUnwrittenAtClose() {
        guard !unwritten.isEmpty, database != nil, (try? execute("BEGIN IMMEDIATE")) != nil else { return }
        batchOpen = true
        confinement.enter()  // as `joinBatch()` does: `noteIfBatchRolledBack` lets it go
        rewriteUnwritten()
        guard batchOpen else { return }
        batchOpen = false
        confinement.leave()
        if (try? execute("COMMIT")) != nil {
            unwritten.removeAll()
        } else {
            try? execute("ROLLBACK")
            lostCommit = true
        }
    }
}
