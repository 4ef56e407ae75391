import CHaul
import FoundationEssentials
import Glibc
import HaulValues

/// Listing a state directory's downloads, whether or not a manager runs on it.
extension Journal {
    /// Every download recorded in `directory`'s journal, oldest first. With no manager on it, the
    /// journal is opened as a manager would (migrated; rows of a process that is gone marked
    /// interrupted). While one runs, it is read as it stands, read-only: queued and running rows
    /// are live, but for those of a manager that is gone (shown interrupted).
    package static func entries(directory: String) throws(DownloadError) -> [ListedRow] {
        if !JournalOwnership.isHeld(directory: directory) {
            do {
                let journal = try Journal(directory: directory)
                defer { journal.close() }
                return try journal.allRecords().map { ListedRow(id: $0, record: $1) }
            } catch let error where error.code == .journalLocked {
                // A manager took it meanwhile: read it as it stands.
            } catch let error where error.isOutOfSpace {
                // A full disk: opening it as a manager writes; reading it may not need to.
            }
        }
        return try readOnlyEntries(directory: directory)
    }

    /// The entry of `id` in `directory`'s journal, read without opening it as a manager would (a
    /// journal this manager closed as idle); `nil` when there is none or it cannot be read.
    package static func readOnlyEntry(directory: String, id: DownloadID) -> ListedRow? {
        try? readOnlyEntries(directory: directory, id: id).first
    }

    /// The columns a listing needs (all in the journal since schema 3), read without a lock.
    ///
    /// A running download over one connection shows the bytes its partial file holds now: its row
    /// is brought up to date at each checkpoint only (5 s by default), the file at each write. One
    /// over several connections shows its row's, which it writes in the loop turn of each write.
    ///
    /// On a full disk a reader needs room too (SQLite's WAL index, the `-shm` file, when it must be
    /// made or grown): a journal whose WAL holds nothing (closed cleanly) is then read from its
    /// database file alone (`immutable`), which is all of it; one whose WAL holds rows is read with
    /// the WAL index in memory (``Reading/exclusive``), and when that cannot be (a manager has the
    /// journal open, the file may not be written) the full disk is what is reported.
    private static func readOnlyEntries(directory: String, id: DownloadID? = nil) throws(DownloadError) -> [ListedRow] {
        do {
            return try readEntries(directory: directory, id: id, reading: .shared)
        } catch let fullDisk where fullDisk.isOutOfSpace {
            if Self.walIsEmpty("\(directory)/\(fileName)") {
                return try readEntries(directory: directory, id: id, reading: .immutable)
            }
            // Not beside a manager: its connection keeps the index, and the lock would be refused.
            guard !JournalOwnership.isHeld(directory: directory) else { throw fullDisk }
            // The full disk is what the user can act on, not why the other way failed too.
            do { return try readEntries(directory: directory, id: id, reading: .exclusive) } catch { throw fullDisk }
        }
    }

    /// ``readOnlyEntries(directory:id:)`` read one way.
    private static func readEntries(
        directory: String,
        id: DownloadID?,
        reading: Reading
    ) throws(DownloadError) -> [ListedRow] {
        let path = "\(directory)/\(fileName)"
        // Checked as a manager checks it (``PrivateFile``): a FIFO there would hold a listing
        // forever, a link would list another file. Not opened: a manager of this process may have it
        // open, and closing a descriptor of it would drop that manager's SQLite locks.
        _ = try PrivateFile.inspect(path)
        var database: OpaquePointer?
        defer { sqlite3_close_v2(database) }
        let flags =
            (reading == .exclusive ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) | SQLITE_OPEN_NOMUTEX
            | SQLITE_OPEN_NOFOLLOW | (reading == .immutable ? SQLITE_OPEN_URI : 0)
        // A WAL index's blocks allocated before SQLite maps them: a full disk is an error, not SIGBUS.
        _ = CHaul_sqlite_allocate_shared_memory()
        var status = sqlite3_open_v2(reading == .immutable ? immutableURI(path) : path, &database, flags, nil)
        if reading == .exclusive, status == SQLITE_OK, let database {
            status = Self.readWithIndexInMemory(database)
        }
        func failure(_ what: String) -> DownloadError {
            if let database, [SQLITE_IOERR, SQLITE_FULL].contains(sqlite3_errcode(database) & 0xff) {
                // The disk said no (full, gone): not a damaged journal, whose advice would be to move it.
                let cause = sqlite3_errcode(database) & 0xff == SQLITE_FULL ? ENOSPC : sqlite3_system_errno(database)
                if cause != 0 {
                    let detail = "the journal could not be read; it is intact"
                    return DownloadError(code: .fileSystem, url: nil, errno: cause, path: path, detail: detail)
                }
            }
            let message = database.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            return DownloadError(code: .journal, url: nil, path: path, detail: "\(what): \(message)")
        }
        guard status == SQLITE_OK, let database else { throw failure("open failed") }
        sqlite3_busy_timeout(database, 2000)
        var statement: OpaquePointer?
        func sql(_ placed: String) -> String {
            """
            SELECT id, url, destination, state, retry_at, bytes_committed, total_bytes, last_error\(placed)
            FROM downloads \(id == nil ? "" : "WHERE id = ?1") ORDER BY created_at, id
            """
        }
        // placed_mtime since schema 5, segments since 12, owner since 14: a journal of an older Haul
        // that runs now has not got them.
        for columns in [
            ", placed_mtime, segments IS NOT NULL, owner", ", placed_mtime, segments IS NOT NULL", ", placed_mtime", "",
        ] {
            sqlite3_finalize(statement)
            statement = nil
            if sqlite3_prepare_v2(database, sql(columns), -1, &statement, nil) == SQLITE_OK { break }
        }
        guard let statement else { throw failure("read failed") }
        // Each owner looked at once: whether the manager that queued or runs a row still runs.
        var alive: [Int64: Bool] = [:]
        defer { sqlite3_finalize(statement) }
        if let id { Self.bind(statement, 1, id.rawValue) }
        var entries: [ListedRow] = []
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW:
                entries.append(listedRow(statement, directory: directory, alive: &alive))
            case SQLITE_DONE:
                return entries
            default:
                throw failure("read failed")
            }
        }
    }

    /// The row `statement` stands on, with the columns it has (older journals have fewer).
    private static func listedRow(
        _ statement: OpaquePointer,
        directory: String,
        alive: inout [Int64: Bool]
    ) -> ListedRow {
        let columns = sqlite3_column_count(statement)
        var record = JournalRow(url: text(statement, 1) ?? "", destination: text(statement, 2) ?? "")
        record.retryAt = sqlite3_column_double(statement, 4)
        record.state = QueueState(column: text(statement, 3) ?? "", retryAt: record.retryAt)
        record.bytesCommitted = sqlite3_column_int64(statement, 5)
        record.totalBytes = sqlite3_column_type(statement, 6) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, 6)
        record.lastError = text(statement, 7)
        if columns > 8, sqlite3_column_type(statement, 8) != SQLITE_NULL {
            record.placedModificationTime = sqlite3_column_double(statement, 8)
        }
        if columns > 10, owned(record.state) {
            // A row of a manager that is gone (killed) is interrupted: the next to open the journal
            // marks it so.
            let owner = integer(statement, 10) ?? 0
            let isAlive = alive[owner] ?? JournalOwnership.isAlive(owner, in: directory)
            alive[owner] = isAlive
            if !isAlive { record.state = .interrupted }
        }
        var entry = ListedRow(id: DownloadID(rawValue: text(statement, 0) ?? ""), record: record)
        if record.state == .running, columns > 9, sqlite3_column_int(statement, 9) == 0,
            let length = FilePath.fileLength(partialPath(for: entry.id, in: directory))
        {
            entry.bytesOnDisk = length
        }
        return entry
    }

    /// How a listing opens the journal.
    private enum Reading {
        /// Read-only, beside any manager: SQLite's WAL index shared through the `-shm` file.
        case shared
        /// The database file alone, no lock, no WAL (`immutable=1`): all of it when the WAL is empty.
        case immutable
        /// The WAL index in this connection's memory (SQLite's exclusive locking mode, taken before
        /// the first read), no statement allowed to write (`query_only`) and no checkpoint at its
        /// close: the WAL's rows read with no room for a `-shm`. Opened for writing, as SQLite's
        /// exclusive lock needs; fails while any other connection has the journal open.
        case exclusive
    }

    /// Sets `database` up for ``Reading/exclusive``; SQLite's status.
    private static func readWithIndexInMemory(_ database: OpaquePointer) -> Int32 {
        let status = CHaul_sqlite_no_checkpoint_on_close(database)
        guard status == SQLITE_OK else { return status }
        return sqlite3_exec(database, "PRAGMA locking_mode = EXCLUSIVE; PRAGMA query_only = 1", nil, nil, nil)
    }

    /// Whether the database file at `path` holds every row: its WAL is absent or empty.
    private static func walIsEmpty(_ path: String) -> Bool {
        var status = stat()
        return lstat(path + "-wal", &status) != 0 ? errno == ENOENT : status.st_size == 0
    }

    /// `path` as an SQLite URI that opens it `immutable` (no lock, no WAL index), percent-encoded.
    private static func immutableURI(_ path: String) -> String {
        let hex = Array("0123456789ABCDEF")
        var uri = "file:"
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "/"), UInt8(ascii: "."), UInt8(ascii: "-"),
                UInt8(ascii: "_"):
                uri.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                uri += "%\(hex[Int(byte >> 4)])\(hex[Int(byte & 15)])"
            }
        }
        return uri + "?immutable=1"
    }
}

/// One row of a listing, with the bytes its partial file holds when that says more than the row (a
/// download over one connection that another process runs: its row is brought up to date at each
/// checkpoint only, the file at each write). The facade makes it a public `JournalEntry`.
package struct ListedRow: Sendable {
    package var id: DownloadID
    package var record: JournalRow
    /// The partial file's length now, when read instead of the row's last checkpoint.
    package var bytesOnDisk: Int64?

    package init(id: DownloadID, record: JournalRow) {
        self.id = id
        self.record = record
    }
}
