import HaulIO

/// What a manager does about a row it follows, one that another manager (another process, mostly)
/// queued or runs, each time it looks at it (``Scheduler``'s `+Following`). Pure: the row's
/// standing and who runs what are read by the caller.
enum FollowDecision: Equatable {
    /// Completed there: its outcome is published here, and it is no longer followed.
    case completed
    /// The row is this manager's own now (it queued it again): admitted like its other rows.
    case ownRow
    /// Still queued or run by another manager that runs: followed on, under `owner`; `progress`,
    /// the bytes to show when they changed since last shown.
    case followOn(owner: Int64?, progress: Int64?)
    /// Anything else (its manager gone, paused or failed there, the row removed): taken back and
    /// queued as this manager's, with the row as it stands when there is one.
    case takeBack(rowExists: Bool)

    /// The decision for a row standing as `standing` (`nil`: there is none), for the manager whose
    /// owner token is `ownOwner`, which last showed `shownBytes` of it; `isAnotherLiveOwner` says
    /// whether a token is another manager's that still runs.
    static func decide(
        _ standing: Journal.RowStanding?,
        ownOwner: Int64,
        shownBytes: Int64,
        isAnotherLiveOwner: (Int64?) -> Bool
    ) -> FollowDecision {
        guard let standing else { return .takeBack(rowExists: false) }
        if standing.state == .completed { return .completed }
        if Journal.owned(standing.state) {
            if standing.owner == ownOwner { return .ownRow }
            if isAnotherLiveOwner(standing.owner) {
                let changed = standing.bytesCommitted != shownBytes
                return .followOn(owner: standing.owner, progress: changed ? standing.bytesCommitted : nil)
            }
        }
        return .takeBack(rowExists: true)
    }
}
