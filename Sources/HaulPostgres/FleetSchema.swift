import FoundationEssentials
import Haul

/// The queue's table, its indexes and the statements that move its rows.
enum FleetSchema {
    /// The key of the transaction advisory lock that serialises per-host-limited claims across the
    /// fleet ("haul" in ASCII).
    static let claimLock: Int64 = 0x6861_756C
    /// The key of the one that serialises migrations ("haulschm").
    static let migrationLock: Int64 = 0x6861_756C_7363_686D

    /// The column the latest schema added: a table that has it needs nothing.
    static let latestColumn = "error_class"

    /// Creates what is missing, once per database however many processes start at once. A database
    /// whose table has the latest column is left alone, without a lock: DDL on a table the fleet is
    /// using waits for every transaction on it and makes every later one wait (a worker starting
    /// beside three busy ones deadlocked that way).
    static func migrate(_ connection: PostgresConnection) throws(FleetError) {
        let current = try connection.query(
            """
            SELECT 1 FROM pg_attribute
            WHERE attrelid = to_regclass('haul_downloads') AND attname = $1 AND NOT attisdropped
            """,
            [latestColumn]
        )
        guard current.isEmpty else { return }
        try connection.transaction { () throws(FleetError) in
            try connection.query("SELECT pg_advisory_xact_lock($1)", [String(migrationLock)])
            try connection.query(
                """
                CREATE TABLE IF NOT EXISTS haul_downloads (
                    id text PRIMARY KEY,
                    url text NOT NULL,
                    destination text NOT NULL,
                    host text NOT NULL,
                    priority integer NOT NULL DEFAULT 0,
                    seq bigserial NOT NULL,
                    state text NOT NULL DEFAULT 'queued'
                        CHECK (state IN (\(FleetState.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")))),
                    owner text,
                    lease_version bigint NOT NULL DEFAULT 0,
                    lease_expires timestamptz,
                    attempts integer NOT NULL DEFAULT 0,
                    bytes bigint,
                    last_error text,
                    finished_by text,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    updated_at timestamptz NOT NULL DEFAULT now()
                )
                """
            )
            try connection.query(
                "CREATE INDEX IF NOT EXISTS haul_downloads_queue ON haul_downloads (priority DESC, seq) WHERE state = 'queued'"
            )
            try connection.query(
                "CREATE INDEX IF NOT EXISTS haul_downloads_leases ON haul_downloads (lease_expires) WHERE state = 'running'"
            )
            try connection.query(
                "CREATE INDEX IF NOT EXISTS haul_downloads_running ON haul_downloads (host) WHERE state = 'running'"
            )
            // What another process asked of a running row ('paused' or 'cancelled'): its worker
            // learns it at its next renewal.
            try connection.query("ALTER TABLE haul_downloads ADD COLUMN IF NOT EXISTS requested text")
            // The worker that claimed the row last: its state directory may hold the row's bytes
            // (kept when the row goes back to the queue, released or expired).
            try connection.query("ALTER TABLE haul_downloads ADD COLUMN IF NOT EXISTS last_worker text")
            // The last claim ended by its lease running out: its worker may still run, and hands
            // the bytes over when it learns (``FleetLease/previousLeaseExpired``).
            try connection.query(
                "ALTER TABLE haul_downloads ADD COLUMN IF NOT EXISTS lease_expired boolean NOT NULL DEFAULT false"
            )
            // The class of a failure (``DownloadError/Category``): `haul --queue --wait` exits by it.
            try connection.query("ALTER TABLE haul_downloads ADD COLUMN IF NOT EXISTS error_class text")
        }
    }

    /// Rows whose lease expired go back to the queue, in their old places (their `seq`).
    ///
    /// $1: the lease's length. A lease granted or renewed before PostgreSQL last started (an outage
    /// longer than the leases, a restart) expires only once the server has run a lease's length
    /// since: every live worker first gets that time to renew what it holds, instead of the first
    /// one back taking the others' downloads.
    static let requeueExpired = """
        UPDATE haul_downloads SET state = '\(FleetState.target(of: .leaseExpired)!.rawValue)', owner = NULL,
            lease_expires = NULL, lease_expired = true, updated_at = now()
        WHERE id IN (
            SELECT id FROM haul_downloads WHERE \(FleetState.sqlCondition(accepting: .leaseExpired))
                AND lease_expires < now()
                AND (lease_expires - $1::interval > pg_postmaster_start_time()
                    OR now() > pg_postmaster_start_time() + $1::interval)
            FOR UPDATE SKIP LOCKED
        )
        """

    /// What a claim sets and returns; `picked` names the claimed ids and the worker that claimed
    /// each before (returned last).
    private static let claimUpdate = """
        UPDATE haul_downloads AS d
        SET state = '\(FleetState.target(of: .claimed)!.rawValue)', owner = $1, last_worker = $1, lease_version = d.lease_version + 1,
            lease_expires = now() + $2::interval, attempts = d.attempts + 1, lease_expired = false,
            updated_at = now()
        FROM picked WHERE d.id = picked.id
        RETURNING d.id, d.url, d.destination, d.host, d.priority, d.seq, d.lease_version, d.attempts,
            picked.last_worker, picked.lease_expired
        """

    /// $1 worker, $2 lease, $3 how many.
    static let claim = """
        WITH picked AS (
            SELECT id, last_worker, lease_expired FROM haul_downloads WHERE \(FleetState.sqlCondition(accepting: .claimed))
            ORDER BY priority DESC, seq LIMIT $3::integer FOR UPDATE SKIP LOCKED
        )
        \(claimUpdate)
        """

    /// $1 worker, $2 lease, $3 how many, $4 the per-host limit, $5 how many queued rows to look
    /// through (a bounded cost per claim, whatever the queue's length). Run under ``claimLock``.
    static let claimWithinHostLimit = """
        WITH running AS (
            SELECT host, count(*) AS n FROM haul_downloads WHERE state = '\(FleetState.running.rawValue)' GROUP BY host
        ), candidates AS (
            SELECT id, host, priority, seq, last_worker, lease_expired FROM haul_downloads
            WHERE \(FleetState.sqlCondition(accepting: .claimed))
            ORDER BY priority DESC, seq LIMIT $5::integer FOR UPDATE SKIP LOCKED
        ), ranked AS (
            SELECT c.id, c.priority, c.seq, c.last_worker, c.lease_expired, coalesce(r.n, 0) AS n,
                row_number() OVER (PARTITION BY c.host ORDER BY c.priority DESC, c.seq) AS k
            FROM candidates AS c LEFT JOIN running AS r ON r.host = c.host
        ), picked AS (
            SELECT id, last_worker, lease_expired FROM ranked WHERE k + n <= $4::integer ORDER BY priority DESC, seq LIMIT $3::integer
        )
        \(claimUpdate)
        """

    /// $1 worker; arrays: $2 ids, $3 lease versions, $4 states, $5 bytes, $6 errors, $7 their classes. Each row changes
    /// only under its lease; each changed one is announced. Outcomes, and the pauses and cancels a
    /// worker settles, all end a running row this way.
    static let record = """
        WITH done AS (
            UPDATE haul_downloads AS d
            SET state = o.state, bytes = o.bytes, last_error = o.error, error_class = o.class, owner = NULL,
                lease_expires = NULL, requested = NULL, finished_by = $1, updated_at = now()
            FROM unnest($2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::text[], $7::text[])
                AS o(id, version, state, bytes, error, class)
            WHERE d.id = o.id AND d.owner = $1 AND d.lease_version = o.version
                AND \(FleetState.sqlCondition(accepting: .completed, column: "d.state"))
            RETURNING d.id, d.state
        )
        SELECT id, pg_notify('haul_downloads', id || ' ' || state) FROM done
        """

    static let entryColumns =
        "id, url, destination, host, priority, state, owner, lease_version, attempts, bytes, last_error, finished_by, error_class"

    /// $1 the id: the row ``FleetEntry`` reads.
    static let entryByID = "SELECT \(entryColumns) FROM haul_downloads WHERE id = $1"

    /// The first five columns every read of a row starts with: id, url, destination, host, priority.
    struct RowHead {
        let id: DownloadID
        let url: URL
        /// The destination as the row holds it.
        let path: String
        /// It resolved under the reader's output folder.
        let destination: URL
        let host: String
        let priority: Int

        init?(_ row: [String?], outputFolder: URL) {
            guard row.count >= 5, let id = row[0], let url = row[1].flatMap(URL.init(string:)), let path = row[2],
                let host = row[3], let priority = row[4].flatMap({ Int($0) })
            else { return nil }
            (self.id, self.url, self.path, self.host, self.priority) = (
                DownloadID(rawValue: id), url, path, host, priority
            )
            destination = FleetSchema.destination(path, in: outputFolder)
        }
    }

    /// The `$n::text[]` of `leases`' ids and the `$n+1::bigint[]` of their versions: what every
    /// fenced statement matches rows with.
    static func leaseArrays(_ leases: [FleetLease]) -> [String?] {
        [array(leases.map { $0.id.rawValue }), array(leases.map { String($0.version) })]
    }

    /// A row's destination: its path under `folder` (a row that ``refusal(_:in:)`` refuses is never
    /// written, wherever this says).
    static func destination(_ path: String, in folder: URL) -> URL {
        URL(fileURLWithPath: path, isDirectory: false, relativeTo: folder).standardizedFileURL
    }

    /// Why a row's destination may not be written under `folder`, or `nil`: it must be a relative
    /// path inside it (no `..`, not absolute, not in a state folder) that no link existing now leads
    /// out of. Rows can be written by anyone with access to the table; a worker often runs with more
    /// rights than they have.
    static func refusal(_ path: String, in folder: URL) -> String? {
        if let refusal = ConfinedPath.refusal(path) { return "its destination '\(path)' \(refusal)" }
        if let escape = ConfinedPath.escape(path, in: folder.standardizedFileURL.path) {
            return "its destination '\(path)' \(escape)"
        }
        return nil
    }

    /// A PostgreSQL array literal of `values` (each quoted; `nil` is NULL), for a `$n::text[]` parameter.
    static func array(_ values: [String?]) -> String {
        var text = "{"
        for (index, value) in values.enumerated() {
            if index > 0 { text += "," }
            guard let value else {
                text += "NULL"
                continue
            }
            text += "\""
            for character in value.unicodeScalars {
                if character == "\"" || character == "\\" { text += "\\" }
                text.unicodeScalars.append(character)
            }
            text += "\""
        }
        return text + "}"
    }

    /// `duration` as a PostgreSQL interval's text, to the millisecond.
    static func interval(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000) milliseconds"
    }
}
