import Dispatch
import FoundationEssentials
import HaulIO
import HaulValues

/// Rows a caller asks for (``SchedulerCommand/writeRows(_:)``), written by the loop: the request
/// travels whole in one command, the loop writes its row in a transaction of its own and keeps what
/// the row does not hold (``CallerGiven``), and the caller is answered once the row is durable.
package struct RowWrite: Sendable {
    /// The state directory whose journal the rows go to.
    package let directory: String
    /// Writes the rows, on the loop, inside the transaction (its throw undoes them).
    package let write: @Sendable (inout RowWriting) throws(DownloadError) -> Void
    /// Told once: after the commit (`nil`), or why the rows were not written.
    package let answer: @Sendable (DownloadError?) -> Void

    package init(
        directory: String,
        write: @escaping @Sendable (inout RowWriting) throws(DownloadError) -> Void,
        answer: @escaping @Sendable (DownloadError?) -> Void
    ) {
        self.directory = directory
        self.write = write
        self.answer = answer
    }
}

/// What a ``RowWrite`` works with on the loop: the journal, what callers gave so far, and what this
/// write changes of it (kept once the transaction commits), with what the loop does next.
package struct RowWriting {
    /// The journal, in the write's transaction.
    package let journal: Journal
    private let given: CallerGivenTable
    /// The downloads whose files are being placed now (their checks made already).
    private let finishing: Set<DownloadID>
    /// What callers gave that this write changes (`nil`: forgotten).
    private(set) var changes: [DownloadID: CallerGiven?] = [:]
    /// Whether a row was queued (admission looks at the journal's queue again).
    private(set) var queued = false
    /// Rows another manager queued or runs, asked for now: followed to their outcomes.
    private(set) var followed: [DownloadID: JournalRow] = [:]
    /// Rows asked for again while queued, waiting or running, as written: a transfer running one
    /// takes the request's part of it (``TransferInput/asked(_:)``).
    private(set) var asked: [DownloadID: JournalRow] = [:]
    /// What the caller's write in progress replaced, to put back if its savepoint is undone: the
    /// entries as they were before (a copy of the whole would make each write cost as much as the
    /// ones before it in the same wake).
    private var undoing = Undo()

    private struct Undo {
        var changes: [(DownloadID, CallerGiven??)] = []
        var followed: [(DownloadID, JournalRow?)] = []
        var asked: [(DownloadID, JournalRow?)] = []
        var queued = false
    }

    init(journal: Journal, given: CallerGivenTable, finishing: Set<DownloadID> = []) {
        self.journal = journal
        self.given = given
        self.finishing = finishing
    }

    /// Whether `id`'s file is being placed: its checks (checksum, size) were made already.
    package func isFinishing(_ id: DownloadID) -> Bool { !finishing.isEmpty && finishing.contains(id) }

    /// What is kept for `id` now.
    package func given(_ id: DownloadID) -> CallerGiven? {
        if let changed = changes[id] { return changed }
        return given[id]
    }

    /// Keeps what the latest request for `id` gives, in place of what an earlier one gave.
    package mutating func give(_ given: CallerGiven, for id: DownloadID) {
        change(id, to: given)
    }

    /// Keeps `url` for `id`, credentials or not: a URL that is not the row's yet.
    package mutating func give(newURL url: URL, for id: DownloadID) {
        var entry = given(id) ?? CallerGiven()
        entry.url = url
        change(id, to: entry)
    }

    /// The bytes on disk of `id` are proven by the overlap before they are continued (a partial file
    /// adopted from a journal that is gone, ``Journal/adoptOrphanPartial(for:)``).
    package mutating func provesByOverlap(_ id: DownloadID) {
        var entry = given(id) ?? CallerGiven()
        entry.provesByOverlap = true
        change(id, to: entry)
    }

    /// A row was queued.
    package mutating func markQueued() { queued = true }

    /// `id`'s row is another manager's: its outcome is followed (`record`: the row as asked for).
    package mutating func follow(_ id: DownloadID, _ record: JournalRow) {
        undoing.followed.append((id, followed.updateValue(record, forKey: id)))
    }

    private mutating func change(_ id: DownloadID, to entry: CallerGiven) {
        undoing.changes.append((id, changes.updateValue(.some(entry), forKey: id)))
    }

    /// `id`'s row was asked for again while it is not new (queued, waiting or running): `record`
    /// as written.
    package mutating func noteAsked(_ id: DownloadID, _ record: JournalRow) {
        undoing.asked.append((id, asked.updateValue(record, forKey: id)))
    }

    /// A caller's write starts: what it changes can be undone until the next one starts.
    mutating func beginCallersWrite() {
        undoing.changes.removeAll(keepingCapacity: true)
        undoing.followed.removeAll(keepingCapacity: true)
        undoing.asked.removeAll(keepingCapacity: true)
        undoing.queued = queued
    }

    /// The caller's write in progress was undone (its savepoint rolled back): so is what it changed.
    mutating func undoCallersWrite() {
        for (id, before) in undoing.changes.reversed() { changes[id] = before }
        for (id, before) in undoing.followed.reversed() { followed[id] = before }
        for (id, before) in undoing.asked.reversed() { asked[id] = before }
        queued = undoing.queued
        beginCallersWrite()
    }
}

/// A caller's wait for the loop's answer to one command: the value the loop's work set, or the error
/// it answered with.
///
/// No lock: whoever answers sets the value and the error before it signals, once, and the caller
/// reads them after its wait returns; the semaphore's signal and wait order the two (as a lock's
/// release and acquire would).
package final class Reply<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `value` and `error` are written before `answered` is signalled and read
    // after it is waited for, never at once.
    private nonisolated(unsafe) var value: Value?
    private nonisolated(unsafe) var error: DownloadError?
    private let answered = DispatchSemaphore(value: 0)

    package init() {}

    /// Keeps the value; the caller gets it once ``answer(_:)`` is told. Before ``answer(_:)``, by
    /// whoever answers.
    package func set(_ value: Value) { self.value = value }

    /// Ends the wait, once: with the value set, or `error`.
    package func answer(_ error: DownloadError?) {
        self.error = error
        answered.signal()
    }

    /// Waits for the answer.
    ///
    /// - Throws: the error answered, or `.shutdown` when no value was set (the loop ended first).
    package func wait() throws(DownloadError) -> Value {
        answered.wait()
        if let error { throw error }
        guard let value else { throw DownloadError(code: .shutdown, url: nil) }
        return value
    }
}
