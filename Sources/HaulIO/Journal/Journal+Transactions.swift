import CHaul
import HaulValues

/// A journal's transactions: a caller's own, a savepoint of the loop's open batch, and the loop's
/// own for the rows callers ask for.
extension Journal {
    /// Runs `body` in one SQLite transaction (one commit for many rows), inside the journal. Inside the
    /// loop thread's open batch, `body` is a savepoint of it. In memory, `body` runs inside the journal
    /// (no other thread sees its rows before it ends; its writes cannot fail, so none is undone).
    package func transaction<T>(_ body: () throws(DownloadError) -> T) throws(DownloadError) -> T {
        if isInMemory { return try confined(body) }
        return try confined { () throws(DownloadError) -> T in try holdingLock(body) }
    }

    /// ``transaction(_:)`` once inside the journal: a savepoint of the loop's open
    /// batch, or a transaction of its own.
    private func holdingLock<T>(_ body: () throws(DownloadError) -> T) throws(DownloadError) -> T {
        try joinBatch()
        guard batchOpen else { return try immediately(body) }
        savepoints += 1
        defer { savepoints -= 1 }
        return try inSavepoint("haul_transaction", body)
    }

    /// `body` between `BEGIN IMMEDIATE` and `COMMIT`, rolled back when it throws or the commit fails.
    private func immediately<T>(_ body: () throws(DownloadError) -> T) throws(DownloadError) -> T {
        try execute("BEGIN IMMEDIATE")
        do throws(DownloadError) {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// `body` in the savepoint `name` of the open transaction, its writes undone alone when it
    /// throws (unless SQLite undid the whole transaction: ``isInTransaction`` then says so).
    private func inSavepoint<T>(_ name: String, _ body: () throws(DownloadError) -> T) throws(DownloadError) -> T {
        try execute("SAVEPOINT \(name)")
        do throws(DownloadError) {
            let result = try body()
            try execute("RELEASE \(name)")
            return result
        } catch {
            if isInTransaction {
                try? execute("ROLLBACK TO \(name)")
                try? execute("RELEASE \(name)")
            }
            throw error
        }
    }

    /// Runs `body` in a transaction of its own, on the loop thread: the rows a caller asked for
    /// (``transaction(_:)`` is the caller's own elsewhere). The turn's open batch commits first (a
    /// failure is reported at the turn's end, as the batch's own; its rows stay unwritten, made again
    /// by the next batch), and `body`'s writes are durable when it returns, or undone when it throws
    /// or the commit fails. In memory, `body` runs inside the journal.
    package func transactionOfItsOwn<T>(_ body: () throws(DownloadError) -> T) throws(DownloadError) -> T {
        if isInMemory { return try confined(body) }
        acquire()
        defer { confinement.leave() }
        if batchOpen {
            guard savepoints == 0 else { return try holdingLock(body) }
            do throws(DownloadError) { try commitBatch() } catch { deferredCommitError = error }
        }
        ownTransactionOpen = true
        defer { ownTransactionOpen = false }
        return try immediately(body)
    }

    /// Tells who waits for the loop's batch (``commitWaiters``) that it committed, or why not.
    func answerCommitWaiters(_ error: DownloadError?) {
        guard !commitWaiters.isEmpty else { return }
        let waiters = commitWaiters
        commitWaiters.removeAll()
        for waiter in waiters { waiter(error) }
    }

    /// Runs `body` in a savepoint of the open transaction: its writes undone alone when it throws
    /// (unless SQLite undid the whole transaction: ``isInTransaction`` then says so). In memory,
    /// `body` runs as it is (its writes cannot fail).
    package func savepoint<T>(_ body: () throws(DownloadError) -> T) throws(DownloadError) -> T {
        if isInMemory { return try body() }
        return try inSavepoint("haul_write", body)
    }

    /// Whether a transaction is open on the journal's connection (SQLite ends one itself after
    /// some failed writes: a full disk, an I/O error).
    package var isInTransaction: Bool {
        guard let database else { return false }
        return sqlite3_get_autocommit(database) == 0
    }
}
