import HaulIO
import HaulValues

/// The rows callers ask for (``RowWrite``), written on the loop.
extension Scheduler {
    /// Writes the rows callers asked for in one wake: a transaction of their own per journal, a
    /// savepoint per caller (one that fails undoes its own rows alone), each caller answered once
    /// the transaction commits, or with why not (a full disk: nothing of its request is kept). What
    /// they give beyond the rows is kept then, and the queue looked at again.
    package func writeRows(_ writes: [RowWrite]) {
        reactor.assertOnLoop()
        guard !pool.isShuttingDown else {
            for write in writes { write.answer(DownloadError(code: .shutdown, url: nil)) }
            return
        }
        var directories: [String] = []
        var byDirectory: [String: [RowWrite]] = [:]
        for write in writes {
            if byDirectory[write.directory] == nil { directories.append(write.directory) }
            byDirectory[write.directory, default: []].append(write)
        }
        for directory in directories { writeRows(byDirectory[directory] ?? [], into: directory) }
    }

    /// ``writeRows(_:)`` for one journal's.
    private func writeRows(_ writes: [RowWrite], into directory: String) {
        var errors: [DownloadError?] = []
        let written: (changes: [DownloadID: CallerGiven?], queued: Bool, followed: [DownloadID: JournalRow])
        do throws(DownloadError) {
            let journal = try catalog.journal(for: directory)
            // What callers gave so far is read inside, so that no copy of it outlives the transaction:
            // one would make the first change to the pool's copy below a copy of the whole table.
            let body = { () throws(DownloadError) in
                var writing = RowWriting(journal: journal, given: self.pool.given)
                for write in writes {
                    errors.append(try Self.write(write, in: journal, &writing))
                }
                return (writing.changes, writing.queued, writing.followed)
            }
            written = try journal.transactionOfItsOwn(body)
        } catch {
            for write in writes { write.answer(error) }
            return
        }
        for (id, entry) in written.changes { pool.given.set(entry, for: id) }
        for (write, error) in zip(writes, errors) { write.answer(error) }
        if written.queued {
            pool.queueChanged(in: directory)
            admitAtTurnEnd()
        }
        if !written.followed.isEmpty { follower.follow(written.followed, in: directory) }
    }

    /// One caller's write, in a savepoint of the transaction: `nil`, or why it was undone.
    ///
    /// - Throws: when the whole transaction is gone (SQLite undid it after a full disk or an I/O
    ///   error): no caller's rows are written.
    private static func write(
        _ write: RowWrite,
        in journal: Journal,
        _ writing: inout RowWriting
    ) throws(DownloadError) -> DownloadError? {
        writing.beginCallersWrite()
        do throws(DownloadError) {
            try journal.savepoint { () throws(DownloadError) in try write.write(&writing) }
            return nil
        } catch {
            writing.undoCallersWrite()
            guard journal.isInTransaction else { throw error }
            return error
        }
    }
}
