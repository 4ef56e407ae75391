import FoundationEssentials
import HaulIO
import HaulScheduler
import HaulValues

/// What a manager holds, read where it lives (on its loop while it runs; directly once it stopped,
/// when nothing else touches it) and handed back as values: what tests check of a manager's
/// insides (no object for a queued download, every claimed name freed, buffers bounded, a feed
/// that costs nothing until someone reads every event, the rows as the loop wrote them), without
/// reaching into its scheduler or catalog from their own thread.
extension DownloadManager {
    struct Holdings: Sendable {
        /// Admitted transfers alive, and handles of downloads alive.
        var transfers: Int
        var handles: Int
        /// The most write buffers in use at once so far.
        var peakBuffers: Int
        /// Names claimed for files about to be placed.
        var claimedNames: Int
        /// Whether the manager's feed has a reader of every event (not only outcomes).
        var feedWantsEveryEvent: Bool
        /// Calls into its open journals made off its loop (a debug build counts them: 0 if each
        /// journal is its loop's alone, ``JournalConfinement``).
        var journalOffLoopEntries: Int
    }

    var holdings: Holdings {
        read { [scheduler, catalog] in
            let (peakBuffers, claimedNames) = scheduler.bufferPeakAndClaimedNames
            return Holdings(
                transfers: catalog.census.transfers.load(ordering: .relaxed),
                handles: catalog.census.downloads.load(ordering: .relaxed),
                peakBuffers: peakBuffers,
                claimedNames: claimedNames,
                feedWantsEveryEvent: catalog.feed.wantsEveryEvent,
                journalOffLoopEntries: catalog.openJournals.reduce(0) { $0 + $1.offLoopEntries }
            )
        }
    }

    /// The rows of the journal in `stateDirectory` (open in this manager), `nil` when it is not.
    func journalRows(in stateDirectory: URL) throws -> [HaulValues.DownloadID: JournalRow]? {
        try read { [catalog] () throws(HaulValues.DownloadError) -> [HaulValues.DownloadID: JournalRow]? in
            guard let journal = catalog.openJournal(for: stateDirectory.path) else { return nil }
            return Dictionary(try journal.allRecords(), uniquingKeysWith: { first, _ in first })
        }
    }

    /// SQLite's page cache of the journal in `stateDirectory` now, in KiB.
    func pageCacheKiB(in stateDirectory: URL) -> Int? {
        read { [catalog] in catalog.openJournal(for: stateDirectory.path)?.pageCacheKiB }
    }

    /// `look` on the loop, or at once when the loop has stopped.
    private func read<Value: Sendable, Failure: Error>(
        _ look: @escaping @Sendable () throws(Failure) -> Value
    ) throws(Failure) -> Value {
        let result = queue.lookOnLoop { Result<Value, Failure> { () throws(Failure) in try look() } }
        return try (result ?? Result { () throws(Failure) in try look() }).get()
    }
}
