import HaulIO
import HaulScheduler
import HaulValues
import Tracing

extension DownloadQueue {
    /// See ``DownloadManager/enqueue(_:)``.
    func enqueue(_ requests: some Sequence<DownloadRequest>) throws(HaulValues.DownloadError) -> EnqueueSummary {
        var summary = EnqueueSummary()
        var iterator = requests.makeIterator()
        var position = 0
        // The shared-folder rule walks each folder of this call once.
        var folders = SharedFolderRule.KnownFolders()
        /// The next request that passes the checks; the others are recorded as rejected.
        func nextValid() -> PreparedRequest? {
            while let candidate = iterator.next() {
                defer { position += 1 }
                do throws(HaulValues.DownloadError) {
                    return try prepare(candidate, folders: &folders)
                } catch {
                    summary.rejected.append(.init(index: position, error: DownloadError(error), request: candidate))
                }
            }
            return nil
        }
        var carried = nextValid()
        let context = ServiceContext.current
        // After 8 full runs into one journal (16,384 rows) this call is a bulk enqueue: that journal
        // gets a larger page cache until the call returns.
        var fullRuns: [String: Int] = [:]
        defer { endBulkWrites(fullRuns.filter { $0.value >= 8 }.map(\.key)) }
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
            let counts = try writeRun(
                batch,
                into: first.stateDirectory,
                context: context,
                fullRuns: &fullRuns
            )
            summary.queued += counts.queued
            summary.alreadyQueued += counts.alreadyQueued
            summary.alreadyComplete += counts.alreadyComplete
        }
        return summary
    }

    /// What a run of requests did to their rows.
    private struct RunCounts: Sendable {
        var queued = 0
        var alreadyQueued = 0
        var alreadyComplete = 0
    }

    /// Has the loop write a run of requests into `directory`'s journal, in one transaction.
    private func writeRun(
        _ batch: [PreparedRequest],
        into directory: String,
        context: ServiceContext?,
        fullRuns: inout [String: Int]
    ) throws(HaulValues.DownloadError) -> RunCounts {
        if batch.count == 2048 { fullRuns[directory, default: 0] += 1 }
        let beginsBulk = batch.count == 2048 && fullRuns[directory] == 8
        return try onLoop(directory) { [self] writing, reply throws(HaulValues.DownloadError) in
            if beginsBulk { writing.journal.beginBulkWrite() }
            var counts = RunCounts()
            var rowsExist = false
            for request in batch {
                let outcome = try writeRow(for: request, context: context, in: &writing, rowsExist: &rowsExist)
                _ = publish(outcome, for: request, in: writing.journal, creatingHandle: false)
                note(outcome, of: request.id, in: &writing)
                switch outcome {
                case .queued: counts.queued += 1
                case .waiting, .following: counts.alreadyQueued += 1
                case .complete: counts.alreadyComplete += 1
                }
            }
            reply.set(counts)
        }
    }

    /// The bulk enqueue into each of `directories` ended: their journals' page caches shrink again
    /// (on the loop, which writes their rows).
    private func endBulkWrites(_ directories: [String]) {
        guard !directories.isEmpty else { return }
        _ = lookOnLoop { [catalog] in
            for directory in directories { catalog.openJournal(for: directory)?.endBulkWrite() }
        }
    }
}
