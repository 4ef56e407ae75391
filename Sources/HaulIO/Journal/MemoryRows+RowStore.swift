import HaulValues

/// The journal's row operations on rows held in memory: what ``SQLiteRows`` does in SQL, with the
/// same results in the same order.
extension MemoryRows: RowStore {
    func record(for id: DownloadID) -> JournalRow? { row(id)?.record }

    func records(unfinishedOnly: Bool) -> [(DownloadID, JournalRow)] {
        unfinishedOnly ? ordered(where: \.isUnfinished) : ordered { _ in true }
    }

    func hasUnfinishedRows() -> Bool { rows.values.contains { $0.record.isUnfinished } }

    func standing(of id: DownloadID) -> Journal.RowStanding? {
        row(id).map {
            Journal.RowStanding(
                state: $0.record.state,
                owner: Journal.owned($0.record.state) ? owner : nil,
                bytesCommitted: $0.record.bytesCommitted,
                totalBytes: $0.record.totalBytes
            )
        }
    }

    func destinationIsTaken(_ path: String, except id: DownloadID) -> Bool {
        if row(DownloadID(destinationPath: path)) != nil { return true }
        return rows.contains { (key: DownloadID, row: Row) -> Bool in
            key != id && row.record.folder != nil && row.record.destination == path
        }
    }

    func heads(
        at now: Double,
        excludingHosts excludedHosts: Set<String>,
        limit: Int,
        rowLimit: Int
    ) -> Journal.QueuedRows {
        var heads = Journal.QueuedRows(changes: changes, capacity: limit)
        var read = 0
        for key in queue {
            guard read < rowLimit else { break }
            guard let record = row(key.id)?.record, record.retryAt <= now else { continue }
            read += 1
            if !excludedHosts.isEmpty, excludedHosts.contains(record.host) {
                heads.blocked = true
                continue
            }
            heads.append(
                Journal.QueuedRow(
                    id: key.id,
                    place: Journal.QueuePlace(priority: record.priority, sequence: record.queueSequence),
                    record: record,
                    rowID: key.number,
                    changes: heads.changes
                )
            )
            guard heads.count < limit else {
                heads.mayHaveMore = true
                return heads
            }
        }
        heads.mayHaveMore = read == rowLimit
        return heads
    }

    func claim(_ head: Journal.QueuedRow, unchangedSince changes: inout Int64) -> JournalRow? {
        guard let row = row(head.id), row.number == head.rowID, Self.isAdmissible(row.record.state) else {
            return nil  // no longer queued
        }
        var record = row.record
        record.apply(.admitted)
        put(record, for: head.id)
        changes = self.changes
        return record
    }

    func queueCounts(at now: Double) -> (queued: Int, waitingToRetry: Int) {
        (queue.count, queue.count { (row($0.id)?.record.retryAt ?? 0) > now })
    }

    func nextRetryTime(after now: Double) -> Double? {
        queue.compactMap { row($0.id)?.record.retryAt }.filter { $0 > now }.min()
    }

    func requeueInterrupted() {
        for (id, row) in rows where row.record.state.after(.continued) == .moves(to: .queued) {
            var record = row.record
            _ = record.apply(.continued)
            put(record, for: id)
        }
    }

    func update(_ record: JournalRow, for id: DownloadID, at rowID: Int64?) { put(record, for: id) }

    func save(_ record: JournalRow, for id: DownloadID) { put(record, for: id) }

    func insertIfAbsent(_ record: JournalRow, for id: DownloadID) -> Bool {
        guard row(id) == nil else { return false }
        put(record, for: id)
        return true
    }

    func recordSynced(_ id: DownloadID, bytes: Int64) {
        guard var record = row(id)?.record, record.state != .completed else { return }
        record.bytesSynced = max(record.bytesSynced, bytes)
        put(record, for: id)
    }

    func remove(_ id: DownloadID) { removeRow(id) }
}
