import HaulIO
import HaulValues

/// The rows callers ask for (``RowWrite``), written on the loop: a transaction of their own per
/// journal, a savepoint per caller (one that fails undoes its own rows alone), each caller answered
/// once the transaction commits, or with why not (a full disk: nothing of its request is kept). A
/// job with no state: what callers gave so far is handed to it, and what their writes change of
/// it, and what the scheduler does next, returned.
struct RowWriter {
    let catalog: Catalog

    /// What one journal's writes left for the scheduler to do, their callers answered.
    struct Written {
        /// What callers gave that the writes changed (`nil`: forgotten), to keep.
        var changes: [DownloadID: CallerGiven?]
        /// A row was queued: admission looks at the journal's queue again.
        var queued: Bool
        /// Rows another manager queued or runs, asked for now: to follow.
        var followed: [DownloadID: JournalRow]
        /// Rows asked for again (``RowWriting/asked``): a transfer running one takes them.
        var asked: [DownloadID: JournalRow]
        /// Each caller's answer, in the order of the writes: `nil`, or why its rows were undone.
        var errors: [DownloadError?] = []

        /// Answers each of `writes`, the writes this is of (once what they changed is kept).
        func answer(_ writes: [RowWrite]) {
            for (write, error) in zip(writes, errors) { write.answer(error) }
        }
    }

    /// `writes` grouped by journal, in the order their journals first appear.
    static func byDirectory(_ writes: [RowWrite]) -> [(directory: String, writes: [RowWrite])] {
        var directories: [String] = []
        var byDirectory: [String: [RowWrite]] = [:]
        for write in writes {
            if byDirectory[write.directory] == nil { directories.append(write.directory) }
            byDirectory[write.directory, default: []].append(write)
        }
        return directories.map { ($0, byDirectory[$0] ?? []) }
    }

    /// Writes `writes`, all into `directory`'s journal, with what callers gave so far (`given`,
    /// borrowed for the call: a copy that outlived the transaction would make the first change to
    /// the pool's table a copy of all of it). The callers are to be answered after the commit
    /// (``Written/answer(_:)``), once what their writes changed is kept. `nil`: the transaction
    /// failed, and every caller was told why.
    /// `finishing`: the downloads whose files are being placed.
    func write(
        _ writes: [RowWrite],
        into directory: String,
        given: CallerGivenTable,
        finishing: Set<DownloadID>
    ) -> Written? {
        var errors: [DownloadError?] = []
        var written: Written
        do throws(DownloadError) {
            let journal = try catalog.loopJournal(for: directory)
            written = try journal.transactionOfItsOwn { () throws(DownloadError) in
                var writing = RowWriting(journal: journal, given: given, finishing: finishing)
                for write in writes {
                    errors.append(try Self.write(write, in: journal, &writing))
                }
                return Written(
                    changes: writing.changes,
                    queued: writing.queued,
                    followed: writing.followed,
                    asked: writing.asked
                )
            }
        } catch {
            for write in writes { write.answer(error) }
            return nil
        }
        written.errors = errors
        return written
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
