import HaulIO
import HaulValues

/// The rows this manager follows: another manager (another process, mostly) queued or runs them, and
/// this one was asked for them, so it waits for their outcome instead of fetching them twice
/// (``FollowDecision`` says what each look finds). Also those their callers paused here, until they
/// are resumed. Loop thread only; the scheduler's `+Following` reads the journals.
struct FollowedRows {
    private var rows: [DownloadID: FollowedRow] = [:]
    /// Each followed journal's `data_version` at the last look.
    private var versions: [String: Int64] = [:]
    private var paused: [DownloadID: FollowedRow] = [:]

    /// Whether no row is followed (paused ones aside).
    var isEmpty: Bool { rows.isEmpty }

    /// The row of `id`, when it is followed.
    subscript(id: DownloadID) -> FollowedRow? { rows[id] }

    /// Follows `records` (as the request found them) of `directory`'s journal.
    mutating func follow(_ records: [DownloadID: JournalRow], in directory: String) {
        for (id, record) in records { rows[id] = FollowedRow(directory: directory, requested: record) }
    }

    /// Stops following `id` (its outcome is known, or it is this manager's now).
    mutating func stop(_ id: DownloadID) { rows[id] = nil }

    /// What the last look at `id` saw: the manager that runs it, and the bytes shown on its handle.
    mutating func saw(_ id: DownloadID, owner: Int64?, shownBytes: Int64?) {
        rows[id]?.owner = owner
        if let shownBytes { rows[id]?.shownBytes = shownBytes }
    }

    /// The followed rows by journal.
    func byDirectory() -> [String: [DownloadID]] {
        var found: [String: [DownloadID]] = [:]
        for (id, row) in rows { found[row.directory, default: []].append(id) }
        return found
    }

    /// Whether `ids` of `directory`'s journal stand as they stood at the last look: nothing was
    /// committed there since (the same `version`, SQLite's `data_version`) and every owner seen
    /// then still runs (`isLive`). Records `version` for the next look.
    mutating func areUnchanged(
        _ ids: [DownloadID],
        in directory: String,
        version: Int64?,
        isLive: (Int64) -> Bool
    ) -> Bool {
        var owners = Set<Int64>()
        var allSeen = true
        for id in ids {
            if let owner = rows[id]?.owner { owners.insert(owner) } else { allSeen = false }
        }
        if allSeen, version != nil, version == versions[directory], owners.allSatisfy(isLive) { return true }
        versions[directory] = version
        return false
    }

    /// Forgets the versions of journals no row is followed in any more.
    mutating func keepVersions(of directories: some Collection<String>) {
        versions = versions.filter { directory, _ in directories.contains(directory) }
    }

    /// `id`'s caller paused it: no longer followed until resumed. Whether it was followed.
    mutating func pause(_ id: DownloadID) -> Bool {
        guard let row = rows.removeValue(forKey: id) else { return false }
        paused[id] = row
        return true
    }

    /// `id`'s caller cancelled it, followed or paused here. Whether it was either.
    mutating func cancel(_ id: DownloadID) -> Bool {
        rows.removeValue(forKey: id) ?? paused.removeValue(forKey: id) != nil
    }

    /// `id`, paused here while followed, is resumed: its row, no longer paused.
    mutating func takePaused(_ id: DownloadID) -> FollowedRow? { paused.removeValue(forKey: id) }

    /// Follows nothing any more (the manager shuts down).
    mutating func removeAll() {
        rows.removeAll()
        paused.removeAll()
        versions.removeAll()
    }
}

/// A row this manager follows: where, and what was asked for.
struct FollowedRow {
    let directory: String
    /// The row as the request found it, with what the request asks for: what is taken back (the
    /// request's part), or queued anew if the row is removed meanwhile.
    let requested: JournalRow
    /// The bytes last shown on its handle.
    var shownBytes: Int64 = -1
    /// The manager that ran it at the last look (`nil` before the first).
    var owner: Int64?
}
