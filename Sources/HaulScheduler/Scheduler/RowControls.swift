import HaulIO
import HaulValues
import Logging

/// A caller's control of a download that does not run here now (queued, waiting to retry, paused,
/// interrupted): only its row changes, in its journal. A row another manager queued or runs is left
/// alone. A job with no state: the scheduler hands it what it needs.
struct RowControls {
    let catalog: Catalog
    let logger: Logger

    /// Applies `event` to `download`'s row. When the row changes, `changed` runs with the journal
    /// locked (so events it publishes come before the loop's next ones).
    func apply(_ event: QueueEvent, to download: LiveDownload, _ changed: (JournalRow) -> Void) {
        guard let journal = catalog.openLoopJournal(for: download.stateDirectoryPath) else { return }
        journal.confined {
            guard var record = try? journal.record(for: download.id), record.state != .running,
                !journal.isOwnedByAnother(download.id)
            else { return }
            switch record.apply(event) {
            case .refused, .unchanged:
                return
            case .moves(let state):
                do {
                    if state == .cancelled {
                        try journal.recordCancelled(record, for: download.id)
                    } else {
                        try journal.save(record, for: download.id)
                    }
                } catch {
                    logger.warning(
                        "could not write the journal",
                        metadata: ["haul.url": "\(download.url.redactedString)", "haul.error": "\(error)"]
                    )
                }
            }
            changed(record)
        }
    }

    /// `download`'s own rate limit, kept in its row for its later attempts.
    func setRateLimit(_ rate: Int64?, of download: LiveDownload) {
        guard let journal = catalog.openLoopJournal(for: download.stateDirectoryPath) else { return }
        journal.confined {
            guard var record = try? journal.record(for: download.id), record.state != .running else { return }
            record.maxBytesPerSecond = rate
            try? journal.save(record, for: download.id)
        }
    }
}
