import CHaul
import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

@Suite("Queue row state machine")
struct QueueStateTests {
    /// Every event, once each (associated values do not change where a row goes).
    static let events: [QueueEvent] = [
        .requested(sequence: 7), .revalidationRequested(sequence: 7), .admitted, .paused, .resumed(sequence: 7),
        .cancelled, .progressed, .retryScheduled(at: 100, error: "e"), .failed(error: "e"), .completed,
        .interrupted, .continued,
    ]

    /// The table the machine is meant to follow, written out: for each event, the states it applies in
    /// and where it takes them. Every other pair must be refused.
    static func expected(_ event: QueueEvent, from state: HaulIO.QueueState) -> QueueTransition {
        switch event {
        case .requested:
            switch state {
            case .paused, .interrupted, .failed, .cancelled: return .moves(to: .queued)
            case .queued, .waitingToRetry, .running: return .unchanged
            case .completed: return .refused
            }
        case .revalidationRequested: return state == .completed ? .moves(to: .queued) : .refused
        case .admitted: return [.queued, .waitingToRetry].contains(state) ? .moves(to: .running) : .refused
        case .paused:
            return [.queued, .waitingToRetry, .interrupted, .running].contains(state) ? .moves(to: .paused) : .refused
        case .resumed: return [.paused, .interrupted].contains(state) ? .moves(to: .queued) : .refused
        case .cancelled: return state.isUnfinished ? .moves(to: .cancelled) : .refused
        case .progressed: return state == .running ? .moves(to: .running) : .refused
        case .retryScheduled: return state == .running ? .moves(to: .waitingToRetry) : .refused
        case .failed: return state == .running ? .moves(to: .failed) : .refused
        case .completed: return state == .running ? .moves(to: .completed) : .refused
        case .interrupted:
            return [.queued, .waitingToRetry, .running].contains(state) ? .moves(to: .interrupted) : .refused
        case .continued: return state == .interrupted ? .moves(to: .queued) : .refused
        }
    }

    @Test("every event in every state does what the table says")
    func transitionTable() {
        for state in HaulIO.QueueState.allCases {
            for event in Self.events {
                #expect(state.after(event) == Self.expected(event, from: state), "\(event) in \(state)")
            }
        }
    }

    @Test(
        "completed, failed and cancelled are final: only a new request (failed, cancelled) or a revalidation (completed) moves them"
    )
    func finalStates() {
        for event in Self.events {
            let fromCompleted = HaulIO.QueueState.completed.after(event)
            #expect(fromCompleted == .refused || event == .revalidationRequested(sequence: 7), "\(event)")
            let fromFailed = HaulIO.QueueState.failed.after(event)
            #expect(fromFailed == .refused || event == .requested(sequence: 7), "\(event)")
            let fromCancelled = HaulIO.QueueState.cancelled.after(event)
            #expect(fromCancelled == .refused || event == .requested(sequence: 7), "\(event)")
        }
        #expect(HaulIO.QueueState.allCases.filter { !$0.isUnfinished } == [.completed, .failed, .cancelled])
    }

    @Test("a cancel forgets what was fetched and keeps what was asked for; a request after it starts anew")
    func cancelForgetsTheBytes() {
        var record = JournalRow(url: "http://h/a", destination: "/tmp/dir/a.bin")
        record.folder = "/tmp/dir"
        record.priority = 4
        record.expectedChecksum = "sha256:00"
        record.queueSequence = 3
        record.apply(.admitted)
        (record.totalBytes, record.entityTag, record.lastModified) = (1000, "\"v1\"", "Mon, 02 Jan 2006 15:04:05 GMT")
        (record.bytesCommitted, record.bytesSynced, record.attempts) = (600, 512, 2)
        record.segments = "0-499:300:256"
        #expect(record.apply(.paused) == .moves(to: .paused))
        #expect(record.apply(.cancelled) == .moves(to: .cancelled))
        #expect(record.state == .cancelled && !record.isUnfinished && !record.mayHaveStarted)
        #expect(record.bytesCommitted == 0 && record.bytesSynced == 0 && record.segments == nil)
        #expect(record.totalBytes == nil && record.entityTag == nil && record.lastModified == nil)
        #expect(record.destination == "/tmp/dir" && record.folder == "/tmp/dir", "the chosen name is given back")
        #expect(record.priority == 4 && record.expectedChecksum == "sha256:00" && record.queueSequence == 3)
        #expect(record.apply(.resumed(sequence: 9)) == .refused, "a cancelled download is not resumed")
        #expect(record.apply(.requested(sequence: 9)) == .moves(to: .queued))
        #expect(record.state == .queued && record.queueSequence == 9)
    }

    @Test("a refused or unchanged event leaves the record exactly as it was")
    func refusedEventsChangeNothing() {
        for state in HaulIO.QueueState.allCases {
            for event in Self.events {
                var record = JournalRow(url: "http://h/a", destination: "/tmp/a")
                record.state = state
                record.lastError = "before"
                record.queueSequence = 3
                let before = record
                let transition = record.apply(event)
                if transition == .refused || transition == .unchanged {
                    #expect(record == before, "\(event) in \(state)")
                }
            }
        }
    }

    @Test("a retry records its time and error; admission clears the time; a request clears the error")
    func retryWaitsThenRuns() {
        var record = JournalRow(url: "http://h/a", destination: "/tmp/a")
        #expect(record.apply(.admitted) == .moves(to: .running))
        #expect(record.apply(.retryScheduled(at: 1234.5, error: "HTTP 503")) == .moves(to: .waitingToRetry))
        #expect(record.state == .waitingToRetry && record.retryAt == 1234.5 && record.lastError == "HTTP 503")
        #expect(record.apply(.admitted) == .moves(to: .running))
        #expect(record.state == .running && record.retryAt == 0)
        #expect(record.apply(.failed(error: "HTTP 404")) == .moves(to: .failed))
        #expect(record.lastError == "HTTP 404")
        #expect(record.apply(.requested(sequence: 42)) == .moves(to: .queued))
        #expect(record.state == .queued && record.lastError == nil && record.queueSequence == 42)
    }

    @Test("an interrupted download that was waiting to retry still waits when it is continued; a resume goes at once")
    func interruptedRetryKeepsItsTime() {
        var record = JournalRow(url: "http://h/a", destination: "/tmp/a")
        record.apply(.admitted)
        record.apply(.retryScheduled(at: 99, error: "e"))
        #expect(record.apply(.interrupted) == .moves(to: .interrupted))
        var continued = record
        #expect(continued.apply(.continued) == .moves(to: .queued))
        #expect(continued.state == .waitingToRetry && continued.retryAt == 99)
        var resumed = record
        #expect(resumed.apply(.resumed(sequence: 5)) == .moves(to: .queued))
        #expect(resumed.state == .queued && resumed.retryAt == 0 && resumed.queueSequence == 5)
        var paused = record
        paused.state = .waitingToRetry
        #expect(paused.apply(.paused) == .moves(to: .paused))
        #expect(paused.retryAt == 0)
    }

    @Test("a revalidation queues a completed row and marks it; completion clears the mark")
    func revalidation() {
        var record = JournalRow(url: "http://h/a", destination: "/tmp/a")
        record.state = .completed
        #expect(record.apply(.revalidationRequested(sequence: 9)) == .moves(to: .queued))
        #expect(record.revalidate && record.queueSequence == 9)
        record.apply(.admitted)
        #expect(record.apply(.completed) == .moves(to: .completed))
        #expect(!record.revalidate)
    }

    @Test("the stored column round-trips every state; waiting to retry is stored queued with its time")
    func storedColumn() {
        for state in HaulIO.QueueState.allCases {
            let retryAt: Double = state == .waitingToRetry ? 50 : 0
            #expect(HaulIO.QueueState(column: state.column, retryAt: retryAt) == state)
        }
        #expect(HaulIO.QueueState.waitingToRetry.column == "queued")
        #expect(HaulIO.QueueState(column: "from a newer Haul", retryAt: 0) == .interrupted)
        #expect(Set(HaulIO.QueueState.allCases.map(\.description)).count == HaulIO.QueueState.allCases.count)
    }

    @Test("the SQL that moves many rows at once is the machine's table")
    func derivedSQL() {
        #expect(HaulIO.QueueState.sqlCondition(accepting: .admitted, to: .running) == "state = 'queued'")
        #expect(Journal.admissible == "state = 'queued'")
        #expect(
            HaulIO.QueueState.sqlCondition(accepting: .interrupted, to: .interrupted)
                == "state IN ('queued', 'running')"
        )
        #expect(HaulIO.QueueState.sqlCondition(accepting: .continued, to: .queued) == "state = 'interrupted'")
        #expect(
            HaulIO.QueueState.sqlCondition(HaulIO.QueueState.allCases.filter(\.isUnfinished))
                == "state IN ('queued', 'running', 'paused', 'interrupted')"
        )
    }

    @Test("in a journal: a retry's wait is stored, survives a restart as interrupted, and comes back waiting")
    func journalKeepsTheRetryWait() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let id = HaulValues.DownloadID(destinationPath: "/tmp/a")
        let later = Date().timeIntervalSince1970 + 3600
        do {
            let journal = try Journal(directory: directory.path)
            var record = JournalRow(url: "http://h/a", destination: "/tmp/a")
            record.apply(.admitted)
            record.apply(.retryScheduled(at: later, error: "HTTP 503"))
            try journal.save(record, for: id)
            #expect(try journal.record(for: id)?.state == .waitingToRetry)
            // Not admissible before its time; its time is the next wake-up.
            #expect(try journal.nextQueued(at: later - 1).head == nil)
            #expect(try journal.nextRetryTime(after: later - 1) == later)
            let head = try #require(try journal.nextQueued(at: later).head)
            #expect(head.id == id)
            journal.close()
        }
        let reopened = try Journal(directory: directory.path)
        defer { reopened.close() }
        let interrupted = try #require(try reopened.record(for: id))
        #expect(interrupted.state == .interrupted && interrupted.retryAt == later)
        try reopened.requeueInterrupted()
        #expect(try reopened.record(for: id)?.state == .waitingToRetry)
        let head = try #require(try reopened.nextQueued(at: later).head)
        let claimed = try #require(try reopened.claim(head))
        #expect(claimed.state == .running && claimed.retryAt == 0)
        #expect(try reopened.record(for: id) == claimed)
    }

    @Test("a manager's queue heads are read past its running rows by an index of waiting rows alone")
    func queueHeadsSkipRunningRows() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let journal = try Journal(directory: directory.path)
        defer { journal.close() }
        // 300 downloads running, queued before the one still waiting.
        for index in 0...300 {
            let record = JournalRow(url: "http://h/\(index)", destination: "/tmp/q\(index)")
            #expect(record.state == .queued)
            try journal.save(record, for: HaulValues.DownloadID(destinationPath: "/tmp/q\(index)"))
        }
        for claimed in 0..<300 {
            let head = try #require(try journal.nextQueued(at: Date().timeIntervalSince1970).head, "\(claimed)")
            #expect(try journal.claim(head)?.state == .running)
        }
        let waiting = try #require(try journal.nextQueued(at: Date().timeIntervalSince1970).head)
        #expect(waiting.id == HaulValues.DownloadID(destinationPath: "/tmp/q300"))
        // The read's plan: with `downloads_owned` alone (every owned row, running ones first in the
        // queue's order) each admission walked past all running rows; 10,000 running made each
        // `download` call cost 3.5 ms of CPU.
        var statement: OpaquePointer?
        let sql = """
            EXPLAIN QUERY PLAN SELECT id FROM downloads WHERE owner = ?1 AND \(Journal.admissible) AND retry_at <= ?2
            ORDER BY priority DESC, queue_seq LIMIT 1
            """
        #expect(sqlite3_prepare_v2(journal.database, sql, -1, &statement, nil) == SQLITE_OK)
        defer { sqlite3_finalize(statement) }
        var plan: [String] = []
        while sqlite3_step(statement) == SQLITE_ROW { plan.append(String(cString: sqlite3_column_text(statement, 3))) }
        #expect(plan == ["SEARCH downloads USING INDEX downloads_waiting (owner=?)"], "\(plan)")
    }

    @Test("the public listing shows the typed state")
    func listingState() throws {
        var record = JournalRow(url: "http://user:secret@h/a", destination: "/tmp/a")
        record.apply(.admitted)
        record.apply(.retryScheduled(at: 10, error: "e"))
        let entry = JournalEntry(id: HaulValues.DownloadID(rawValue: "x"), record: record)
        #expect(entry.state == .waitingToRetry && entry.state.description == "waitingToRetry")
        #expect(!entry.url.contains("secret"))
    }
}
