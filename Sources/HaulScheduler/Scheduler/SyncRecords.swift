import HaulIO
import HaulTransfer
import HaulValues

/// What a partial file's sync, reported by a disk lane, leaves behind: the bytes it made durable,
/// told to the running transfer (which counts them as synced) and recorded in the download's row, so
/// that a restart resumes from them. A job with no state: the scheduler hands it the lanes' results,
/// and how to find the transfer that runs a download now.
struct SyncRecords {
    let catalog: Catalog
    let environment: TransferEnvironment

    /// Takes the disk lanes' `results`, in order: each sync recorded (``record(_:directory:bytes:segments:running:)``)
    /// unless it failed or is older than a truncation of the partial file, each file placed (or
    /// not) handed to `placed`. `running` finds the transfer that runs a download now.
    func take(
        _ results: [DiskResult],
        running: (DownloadID) -> Transfer?,
        placed: (DownloadID, Result<PlacedFile, DownloadError>) -> Void
    ) {
        for result in results {
            switch result {
            case .synced(let id, let directory, let bytes, let segments):
                guard environment.syncs.reported(id), bytes >= 0 else { continue }
                record(id, directory: directory, bytes: bytes, segments: segments, running: running(id))
            case .placed(let id, let outcome):
                placed(id, outcome)
            }
        }
    }

    /// `id`'s partial file in `directory` is durable up to `bytes` (over several connections:
    /// each segment's bytes as the `segments` snapshot taken when the sync began says).
    private func record(
        _ id: DownloadID,
        directory: String,
        bytes: Int64,
        segments: String?,
        running transfer: Transfer?
    ) {
        guard let journal = catalog.openLoopJournal(for: directory) else { return }
        if let segments {
            recordSegments(id, journal: journal, snapshot: segments, running: transfer)
            return
        }
        _ = transfer?.apply(.synced(bytes: bytes))
        try? journal.recordSynced(id, bytes: bytes)
    }

    /// Each segment's bytes written when the sync began are durable: in the running transfer's map,
    /// or, for a download that does not run now (paused), in its row's.
    private func recordSegments(_ id: DownloadID, journal: Journal, snapshot text: String, running transfer: Transfer?)
    {
        if transfer?.apply(.syncedSegments(text)) != nil { return }
        guard var record = try? journal.record(for: id), let total = record.totalBytes,
            let stored = record.segments, var map = SegmentMap(encoded: stored, total: total),
            let snapshot = SegmentMap(encoded: text, total: total)
        else { return }
        map.markSynced(from: snapshot)
        record.segments = map.encoded
        record.bytesSynced = map.bytesSynced
        try? journal.update(record, for: id)
    }
}
