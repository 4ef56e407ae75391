import HaulValues

/// The checkpoint syncs of partial files that were sent to the disk lanes and not reported yet, per
/// download; a report is recorded only if its partial file was not emptied since it was asked for.
/// Pure bookkeeping, loop thread only. Outlives any one transfer: a paused download's sync may
/// report after it was admitted again and restarted from zero.
package struct SyncLedger {
    private var pending: [DownloadID: (count: Int, stale: Bool)] = [:]

    package init() {}

    /// A sync of `id`'s partial file was sent.
    package mutating func requested(_ id: DownloadID) {
        pending[id, default: (0, false)].count += 1
    }

    /// `id`'s partial file was emptied: syncs still running for it describe bytes that are gone.
    package mutating func truncated(_ id: DownloadID) {
        pending[id]?.stale = true
    }

    /// Whether a sync of `id`'s partial file was sent and has not reported yet.
    package func isPending(_ id: DownloadID) -> Bool { pending[id] != nil }

    /// A sync of `id` reported: whether what it synced is still the partial file's.
    package mutating func reported(_ id: DownloadID) -> Bool {
        guard let entry = pending[id] else { return false }
        pending[id] = entry.count > 1 ? (entry.count - 1, entry.stale) : nil
        return !entry.stale
    }
}
