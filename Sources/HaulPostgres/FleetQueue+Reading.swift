import Dispatch
import FoundationEssentials
import Glibc
import Haul

/// Reading the fleet's queue: one row, a page of rows, the counts by state.
extension FleetQueue {
    // MARK: reading

    /// The queue's row for `id`, or `nil`.
    public func entry(_ id: DownloadID) async throws(FleetError) -> FleetEntry? {
        let outputFolder = configuration.outputFolder
        return try await run { connection throws(FleetError) -> FleetEntry? in
            try connection.query(FleetSchema.entryByID, [id.rawValue])
                .first.flatMap { FleetEntry(row: $0, outputFolder: outputFolder) }
        }
    }

    /// Every row in the fleet's order (priority, then first in), at most `limit`, after `offset`.
    public func entries(limit: Int = 1000, offset: Int = 0) async throws(FleetError) -> [FleetEntry] {
        let outputFolder = configuration.outputFolder
        return try await run { connection throws(FleetError) -> [FleetEntry] in
            try connection.query(
                "SELECT \(FleetSchema.entryColumns) FROM haul_downloads ORDER BY priority DESC, seq LIMIT $1 OFFSET $2",
                [String(max(0, limit)), String(max(0, offset))]
            ).compactMap { FleetEntry(row: $0, outputFolder: outputFolder) }
        }
    }

    /// How many rows are in each state.
    public func counts() async throws(FleetError) -> [FleetState: Int] {
        try await run { connection throws(FleetError) -> [FleetState: Int] in
            var counts: [FleetState: Int] = [:]
            for row in try connection.query("SELECT state, count(*) FROM haul_downloads GROUP BY state") {
                if let state = row[0].flatMap(FleetState.init(rawValue:)), let count = row[1].flatMap({ Int($0) }) {
                    counts[state] = count
                }
            }
            return counts
        }
    }
}
