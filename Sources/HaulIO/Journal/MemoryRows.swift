import FoundationEssentials
import HaulValues

/// The rows of a journal in memory (``Journal/isInMemory``): downloads into streams, memory or
/// nothing, which no other process can see or continue. The same rows the SQLite journal keeps, with
/// the same meanings (``RowStore``), held in Swift: a body fetched into memory wrote and read SQLite
/// four times, about a fifth of the loop thread's time in (k).
///
/// Each row has a number, in the order rows were first written (SQLite's `rowid`, kept by an update):
/// the listing's order, and the claim's check that the row it read is still there. Admissible rows
/// (queued, or waiting for a retry's time) are also kept in the queue's order, highest priority
/// first, then by queue sequence. Used inside the journal (``Journal/confined(_:)``).
final class MemoryRows {
    struct Row {
        var record: JournalRow
        let number: Int64
    }

    /// A place in the admissible rows' order.
    struct QueueKey: Comparable {
        let priority: Int
        let sequence: Int64
        let number: Int64
        let id: DownloadID

        static func < (a: QueueKey, b: QueueKey) -> Bool {
            if a.priority != b.priority { return a.priority > b.priority }
            if a.sequence != b.sequence { return a.sequence < b.sequence }
            return a.number < b.number
        }
    }

    private(set) var rows: [DownloadID: Row] = [:]
    /// The admissible rows, in the queue's order.
    private(set) var queue: [QueueKey] = []
    /// Rows inserted, updated or removed so far (SQLite's `total_changes`).
    private(set) var changes: Int64 = 0
    private var lastNumber: Int64 = 0
    /// The journal's owner token: every queued or running row is its.
    let owner: Int64

    init(owner: Int64) {
        self.owner = owner
    }

    /// Whether a row in `state` may be admitted (``Journal/admissible``).
    static func isAdmissible(_ state: QueueState) -> Bool { state.after(.admitted) == .moves(to: .running) }

    func row(_ id: DownloadID) -> Row? { rows[id] }

    /// Writes `record` as `id`'s row (inserting it when there is none), read back as SQLite's row
    /// would be: its state from its stored word and `retryAt`.
    func put(_ record: JournalRow, for id: DownloadID) {
        var record = record
        record.state = QueueState(column: record.state.column, retryAt: record.retryAt)
        changes += 1
        let number: Int64
        if let old = rows[id] {
            number = old.number
            if Self.isAdmissible(old.record.state) { unqueue(Self.key(old.record, number, id)) }
        } else {
            lastNumber += 1
            number = lastNumber
        }
        rows[id] = Row(record: record, number: number)
        if Self.isAdmissible(record.state) { enqueue(Self.key(record, number, id)) }
    }

    /// Removes `id`'s row, if there is one.
    func removeRow(_ id: DownloadID) {
        guard let old = rows.removeValue(forKey: id) else { return }
        changes += 1
        if Self.isAdmissible(old.record.state) { unqueue(Self.key(old.record, old.number, id)) }
    }

    /// Every row, in the order they were first written.
    func ordered(where include: (JournalRow) -> Bool) -> [(DownloadID, JournalRow)] {
        rows.filter { include($0.value.record) }.sorted { $0.value.number < $1.value.number }.map {
            ($0.key, $0.value.record)
        }
    }

    private static func key(_ record: JournalRow, _ number: Int64, _ id: DownloadID) -> QueueKey {
        QueueKey(priority: record.priority, sequence: record.queueSequence, number: number, id: id)
    }

    /// Where `key` is, or would go, in `queue`.
    private func position(of key: QueueKey) -> Int {
        var (low, high) = (0, queue.count)
        while low < high {
            let middle = (low + high) / 2
            if queue[middle] < key { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private func enqueue(_ key: QueueKey) {
        // Most rows join at the end (a new sequence number at the default priority).
        if let last = queue.last, !(key < last) {
            queue.append(key)
        } else {
            queue.insert(key, at: position(of: key))
        }
    }

    private func unqueue(_ key: QueueKey) {
        let index = position(of: key)
        if index < queue.count, queue[index].number == key.number { queue.remove(at: index) }
    }
}
