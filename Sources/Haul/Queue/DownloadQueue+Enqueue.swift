import HaulIO
import HaulValues

extension DownloadQueue {
    /// See ``DownloadManager/enqueue(_:)``.
    func enqueue(_ requests: some Sequence<DownloadRequest>) throws(HaulValues.DownloadError) -> EnqueueSummary {
        var summary = EnqueueSummary()
        var iterator = requests.makeIterator()
        var position = 0
        /// The next request that passes the checks; the others are recorded as rejected.
        func nextValid() -> PreparedRequest? {
            while let candidate = iterator.next() {
                defer { position += 1 }
                do throws(HaulValues.DownloadError) {
                    return try prepare(candidate)
                } catch {
                    summary.rejected.append(.init(index: position, error: DownloadError(error), request: candidate))
                }
            }
            return nil
        }
        var carried = nextValid()
        // After 8 full runs into one journal (16,384 rows) this call is a bulk enqueue: that journal
        // gets a larger page cache until the call returns.
        var fullRuns: [ObjectIdentifier: Int] = [:]
        var bulkJournals: [Journal] = []
        defer { for journal in bulkJournals { journal.endBulkWrite() } }
        while let first = carried {
            guard !catalog.isShutDown else {
                throw HaulValues.DownloadError(code: .shutdown, url: first.url.redactedString)
            }
            // A run of up to 2,048 requests into one journal, checked before the journal is locked:
            // the lock is held only to write them (the loop thread, which also needs it to admit
            // downloads, gets it between runs).
            var batch = [first]
            carried = nil
            while batch.count < 2048, let next = nextValid() {
                guard next.stateDirectory == first.stateDirectory else {
                    carried = next
                    break
                }
                batch.append(next)
            }
            if batch.count == 2048, carried == nil { carried = nextValid() }
            // The run's events wake a waiting feed reader once, after the run (not once per row).
            let queuedAny = try catalog.feed.deferringWakes { () throws(HaulValues.DownloadError) -> Bool in
                try writeRun(
                    batch,
                    into: first.stateDirectory,
                    fullRuns: &fullRuns,
                    bulkJournals: &bulkJournals,
                    summary: &summary
                )
            }
            if queuedAny { inbox.submit(.queueChanged(first.stateDirectory)) }
        }
        return summary
    }

    /// Writes a run of requests into `directory`'s journal, in one transaction; whether it queued any.
    private func writeRun(
        _ batch: [PreparedRequest],
        into directory: String,
        fullRuns: inout [ObjectIdentifier: Int],
        bulkJournals: inout [Journal],
        summary: inout EnqueueSummary
    ) throws(HaulValues.DownloadError) -> Bool {
        try catalog.withJournal(for: directory) {
            journal throws(HaulValues.DownloadError) -> Bool in
            if batch.count == 2048 {
                fullRuns[ObjectIdentifier(journal), default: 0] += 1
                if fullRuns[ObjectIdentifier(journal)] == 8 {
                    journal.beginBulkWrite()
                    bulkJournals.append(journal)
                }
            }
            var followed: [HaulValues.DownloadID: JournalRow] = [:]
            let queuedAny = try journal.transaction { () throws(HaulValues.DownloadError) -> Bool in
                var queuedAny = false
                var rowsExist = false
                for request in batch {
                    let outcome = try writeRow(for: request, in: journal, rowsExist: &rowsExist)
                    _ = publish(outcome, for: request, in: journal, creatingHandle: false)
                    switch outcome {
                    case .queued:
                        summary.queued += 1
                        queuedAny = true
                    case .waiting: summary.alreadyQueued += 1
                    case .following(let record):
                        summary.alreadyQueued += 1
                        followed[request.id] = record
                    case .complete: summary.alreadyComplete += 1
                    }
                }
                return queuedAny
            }
            // After the commit: the loop follows rows another manager runs to their outcomes.
            if !followed.isEmpty { inbox.submit(.follow(directory, followed)) }
            return queuedAny
        }
    }
}
