import CHaul
import FoundationEssentials
import Glibc
import HaulValues

/// The schema, its numbered migrations, and the recovery after a reboot.
extension Journal {
    // MARK: schema

    /// WAL mode (readers never hold up a writer) with `synchronous = NORMAL` (a commit is durable at
    /// the next checkpoint's sync, not at each commit).
    private func switchToWAL() throws(DownloadError) {
        // Two processes creating one journal at once: the one switching a new database to WAL
        // needs it alone, and SQLite answers the other busy at once, without its busy handler (which
        // could deadlock on the rollback journal's locks): tried again for up to 10 s.
        var mode: String?
        var tries = 0
        while true {
            do {
                mode = try queryText("PRAGMA journal_mode = WAL")
                break
            } catch  where error.code == .journalLocked && tries < Int(Self.busyTimeoutMilliseconds) {
                tries += 1
                usleep(1000)
            }
        }
        if mode?.lowercased() != "wal" {
            throw DownloadError(
                code: .journal,
                url: nil,
                path: path,
                detail: "the journal cannot use WAL mode (\(mode ?? "?"))"
            )
        }
        try execute("PRAGMA synchronous = NORMAL")
    }

    func prepareSchema() throws(DownloadError) {
        // Other managers, in this process or others, write it too: a write waits for theirs (a loop
        // turn's transaction, a run of 2,048 queued rows: milliseconds). A reader never holds up a
        // write in WAL mode.
        sqlite3_busy_handler(database, Self.waitForTheOtherWriter, nil)
        try switchToWAL()
        // Ids are hashes, so queued rows land at random pages of the id index, and each commit and
        // each checkpoint rewrites every page it touched. Measured on 200,000 queued rows: 512-row
        // commits with the default 1,000-page checkpoints wrote 1.27 GB; 2,048-row commits
        // (`enqueue`) with 4,000-page checkpoints, 0.56 GB. The WAL is cut back to 16 MiB after them.
        // The page cache is small but while a bulk enqueue runs (see ``beginBulkWrite()``).
        try execute("PRAGMA cache_size = \(Self.cacheKiB.normal)")
        try execute("PRAGMA wal_autocheckpoint = 4000")
        try execute("PRAGMA journal_size_limit = 16777216")
        try execute("BEGIN IMMEDIATE")
        do throws(DownloadError) {
            let versionText = try queryText("PRAGMA user_version")
            let version = versionText.flatMap { Int32($0) } ?? 0
            if version > Self.schemaVersion {
                throw DownloadError(
                    code: .journal,
                    url: nil,
                    path: path,
                    detail: "it was written by a newer Haul (schema \(version), this one knows \(Self.schemaVersion))"
                )
            }
            if version < 1 { try migrateToVersion1() }
            if version < 2 { try migrateToVersion2() }
            if version < 3 { try migrateToVersion3() }
            if version < 4 { try migrateToVersion4() }
            if version < 5 { try execute("ALTER TABLE downloads ADD COLUMN placed_mtime REAL") }
            let renames = version < 6 ? try migrateToVersion6() : []
            if version < 7 { try execute("ALTER TABLE downloads ADD COLUMN user_agent TEXT") }
            if version < 8 { try execute("ALTER TABLE downloads ADD COLUMN header_names TEXT") }
            if version < 9 {
                try execute("ALTER TABLE downloads ADD COLUMN folder TEXT")
                // Only rows that took their name from the server: other rows' inserts pay nothing.
                try execute(
                    "CREATE INDEX IF NOT EXISTS downloads_named ON downloads (destination) WHERE folder IS NOT NULL"
                )
            }
            if version < 10 { try execute("ALTER TABLE downloads ADD COLUMN mirrors TEXT") }
            if version < 11 { try execute("ALTER TABLE downloads ADD COLUMN rate_limit INTEGER") }
            if version < 12 {
                try execute("ALTER TABLE downloads ADD COLUMN connections INTEGER")
                try execute("ALTER TABLE downloads ADD COLUMN segments TEXT")
            }
            if version < 13 {
                try execute("ALTER TABLE downloads ADD COLUMN keeps_existing INTEGER NOT NULL DEFAULT 0")
            }
            if version < 14 { try migrateToVersion14() }
            if version < 15 { try execute("ALTER TABLE downloads ADD COLUMN placing TEXT") }
            // Version 16: a cancelled download's row stays, as `cancelled` (it was removed). The
            // columns are the same; the number keeps older builds, which would read the state as
            // interrupted and fetch the download again, off a journal that may have such rows.
            try execute("PRAGMA user_version = \(Self.schemaVersion)")
            try makeWaitingIndex()
            try execute("COMMIT")
            // The rows name the new partial files now; a crash before these renames loses the bytes
            // of those partials (they start over), never mixes them up.
            for (old, new) in renames {
                if let new {
                    rename(
                        Self.partialPath(for: DownloadID(rawValue: old), in: directory),
                        Self.partialPath(for: DownloadID(rawValue: new), in: directory)
                    )
                } else {
                    unlink(Self.partialPath(for: DownloadID(rawValue: old), in: directory))
                }
            }
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// How long a write waits for another manager's transaction before it fails (`.journalLocked`).
    static let busyTimeoutMilliseconds: Int32 = 10000

    /// SQLite's busy handler: called while another connection writes, with how many times it was
    /// called for this wait; 1 to try again, 0 to give up. Short steps: another manager's loop turn
    /// holds the journal for a millisecond or two, and `sqlite3_busy_timeout`'s own steps (1, 2, 5,
    /// 10 ms and up) left a writer asleep long after the other had committed
    /// (`Benchmarks/CHOICES.md`).
    static let waitForTheOtherWriter: @convention(c) (UnsafeMutableRawPointer?, Int32) -> Int32 = { _, calls in
        // 200 steps of 50 µs (10 ms), then 1 ms each until about 10 s.
        if calls >= 200 + busyTimeoutMilliseconds { return 0 }
        usleep(calls < 200 ? 50 : 1000)
        return 1
    }

    /// A manager's queue heads, found without passing its running rows: `downloads_owned` holds
    /// those too, and with 10,000 running each admission's read walked past all of them (3.5 ms of
    /// CPU per `download` call). An index only: older builds keep it up to date as SQLite keeps any
    /// index, so it takes no schema number, which would shut them out of the journal.
    func makeWaitingIndex() throws(DownloadError) {
        try execute(
            "CREATE INDEX IF NOT EXISTS downloads_waiting ON downloads (owner, priority DESC, queue_seq) WHERE \(Self.admissible)"
        )
    }

    /// Version 14: a queued or running row names its owner, the manager that queued or runs it
    /// (``JournalOwnership``); each manager's queue is its own rows, found by one index. Rows queued
    /// or running before have none: their process is gone, and opening marks them interrupted.
    func migrateToVersion14() throws(DownloadError) {
        try execute("ALTER TABLE downloads ADD COLUMN owner INTEGER")
        try execute("DROP INDEX IF EXISTS downloads_queue")
        try execute(
            "CREATE INDEX IF NOT EXISTS downloads_owned ON downloads (owner, priority DESC, queue_seq) WHERE owner IS NOT NULL"
        )
    }

    /// Version 6: a download's id is its destination's SHA-256 (it was an FNV-1a hash of URL and
    /// destination). Rows get their new ids; of rows that now share one (one destination asked for
    /// from several URLs), the one written last stays. Returns the partial files to rename (old id
    /// to new), or to delete (to `nil`), once the migration is committed.
    func migrateToVersion6() throws(DownloadError) -> [(String, String?)] {
        let select = try prepared("SELECT id, destination FROM downloads ORDER BY updated_at DESC, id")
        var rows: [(id: String, destination: String)] = []
        while sqlite3_step(select) == SQLITE_ROW {
            rows.append((Self.text(select, 0) ?? "", Self.text(select, 1) ?? ""))
        }
        sqlite3_reset(select)
        var kept = Set<String>()
        var files: [(String, String?)] = []
        for row in rows {
            let new = DownloadID(destinationPath: row.destination).rawValue
            guard kept.insert(new).inserted else {
                try run("DELETE FROM downloads WHERE id = ?1", row.id)
                files.append((row.id, nil))
                continue
            }
            guard new != row.id else { continue }
            try run("UPDATE downloads SET id = ?2 WHERE id = ?1", row.id, new)
            files.append((row.id, new))
        }
        return files
    }

    /// Runs one statement with text parameters.
    private func run(_ sql: String, _ values: String...) throws(DownloadError) {
        let statement = try prepared(sql)
        defer { sqlite3_reset(statement) }
        for (index, value) in values.enumerated() { Self.bind(statement, Int32(index + 1), value) }
        guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("write") }
    }

    func migrateToVersion1() throws(DownloadError) {
        try execute(
            """
            CREATE TABLE IF NOT EXISTS downloads (
                id TEXT PRIMARY KEY NOT NULL,
                url TEXT NOT NULL,
                destination TEXT NOT NULL,
                total_bytes INTEGER,
                etag TEXT,
                last_modified TEXT,
                bytes_committed INTEGER NOT NULL DEFAULT 0,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                last_error TEXT,
                priority INTEGER NOT NULL DEFAULT 0,
                expected_checksum TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )
            """
        )
    }

    /// Version 2: synced checkpoints and the boot they were written in.
    func migrateToVersion2() throws(DownloadError) {
        try execute("ALTER TABLE downloads ADD COLUMN bytes_synced INTEGER NOT NULL DEFAULT 0")
        try execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)")
    }

    /// Version 3: the journal is the queue (order, host, revalidation, retries and their backoff;
    /// "interrupted" downloads) and knows an expected size.
    func migrateToVersion3() throws(DownloadError) {
        try execute("ALTER TABLE downloads ADD COLUMN queue_seq INTEGER NOT NULL DEFAULT 0")
        try execute("ALTER TABLE downloads ADD COLUMN host TEXT NOT NULL DEFAULT ''")
        try execute("ALTER TABLE downloads ADD COLUMN revalidate INTEGER NOT NULL DEFAULT 0")
        try execute("ALTER TABLE downloads ADD COLUMN failures INTEGER NOT NULL DEFAULT 0")
        try execute("ALTER TABLE downloads ADD COLUMN retry_at REAL NOT NULL DEFAULT 0")
        try execute("ALTER TABLE downloads ADD COLUMN expected_size INTEGER")
        try execute("UPDATE downloads SET queue_seq = CAST(created_at * 1000000 AS INTEGER)")
        // Only the columns of version 3: later migrations add the others after this one.
        let statement = try prepared("SELECT id, url FROM downloads WHERE host = ''")
        var hosts: [(id: String, host: String)] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            guard let id = Self.text(statement, 0), let url = Self.text(statement, 1).flatMap(URL.init(string:)) else {
                continue
            }
            hosts.append((id, url.hostKey))
        }
        sqlite3_reset(statement)
        let update = try prepared("UPDATE downloads SET host = ?2 WHERE id = ?1")
        for (id, host) in hosts {
            Self.bind(update, 1, id)
            Self.bind(update, 2, host)
            let status = sqlite3_step(update)
            sqlite3_reset(update)
            guard status == SQLITE_DONE else { throw failure("write") }
        }
        try execute(
            "CREATE INDEX IF NOT EXISTS downloads_queue ON downloads (priority DESC, queue_seq) WHERE \(Self.admissible)"
        )
    }

    /// Version 4: whether a row's Last-Modified is strong. Rows written before are taken as weak: a
    /// partial that only a Last-Modified vouches for starts over rather than risk a splice.
    func migrateToVersion4() throws(DownloadError) {
        try execute("ALTER TABLE downloads ADD COLUMN last_modified_strong INTEGER NOT NULL DEFAULT 0")
    }

    /// After a reboot, bytes that were only in the page cache may be lost or garbage: cut every
    /// unfinished partial file back to its last synced checkpoint (each segment of one fetched over
    /// several connections back to its own).
    func recoverIfRebooted(bootID: String) throws(DownloadError) {
        let previous = try queryText("SELECT value FROM meta WHERE key = 'boot_id'")
        if let previous, previous != bootID {
            recoveredFromReboot = true
            for (id, var record) in try records(where: Self.mayHavePartial) {
                let path = Self.partialPath(for: id, in: directory)
                var status = stat()
                // Not a file of Haul's (a link, a FIFO planted there): left alone, and refused when
                // the download opens it (``PrivateFile``).
                guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_uid == geteuid(),
                    status.st_nlink == 1
                else { continue }
                if let text = record.segments, let total = record.totalBytes {
                    // Over several connections: each segment keeps its synced bytes; the file's
                    // length says nothing (the next writes go where the map says).
                    if var map = SegmentMap(encoded: text, total: total) {
                        map.cutBackToSynced()
                        record.segments = map.encoded
                        record.bytesCommitted = map.bytesWritten
                    } else {
                        record.segments = nil
                        record.bytesCommitted = 0
                        record.bytesSynced = 0
                        _ = truncate(path, 0)
                    }
                    try save(record, for: id)
                    continue
                }
                if Int64(status.st_size) > record.bytesSynced {
                    guard truncate(path, off_t(record.bytesSynced)) == 0 else {
                        throw DownloadError(
                            code: .fileSystem,
                            url: nil,
                            errno: Glibc.errno,
                            path: path,
                            detail: "truncate failed"
                        )
                    }
                }
                record.bytesCommitted = min(Int64(status.st_size), record.bytesSynced)
                try save(record, for: id)
            }
        }
        if previous != bootID {
            try execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('boot_id', '\(bootID.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "''"))')"
            )
        }
    }

    /// Rows that may have a partial file: all but the completed ones and those queued that never ran.
    static let mayHavePartial = """
        NOT \(QueueState.sqlCondition([.completed])) AND NOT (\(QueueState.sqlCondition([.queued]))
        AND attempts = 0 AND bytes_committed = 0 AND bytes_synced = 0)
        """

    /// Records that the first `bytes` of a download's partial file are on stable storage.
}
