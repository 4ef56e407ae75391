import Dispatch
import FoundationEssentials
import Glibc
import Haul

/// Adding downloads to the fleet's queue.
extension FleetQueue {
    // MARK: adding

    /// Adds downloads to the queue; a download whose id is queued already (the same destination) is
    /// left as it is. Returns how many were added.
    ///
    /// Each destination must lie inside `folder` (by default this queue's
    /// ``Configuration/outputFolder``) and is stored by its path relative to it: each worker puts the
    /// file under its own ``Configuration/outputFolder`` (as `haul worker -o`). With `folder`, a row's
    /// id is that of its relative path taken from `/`, the same whoever queues it; without, the
    /// request's ``DownloadRequest/id``. A path that would leave the
    /// folder or land in a state folder (`.haul`) is refused here, and again by each worker that
    /// claims it (``FleetLease/refusal``): rows can be written by anyone with access to the table.
    ///
    /// A fleet's queue holds no secrets: a request with a user name or password in its URL, or with
    /// headers, is refused (give credentials to the workers' managers instead).
    @discardableResult
    public func enqueue(_ requests: [DownloadRequest], relativeTo folder: URL? = nil) async throws(FleetError) -> Int {
        let rows = try Self.rows(
            for: requests,
            relativeTo: folder ?? configuration.outputFolder,
            byRelativePath: folder != nil,
            target: target
        )
        guard !rows.isEmpty else { return 0 }
        let allRows = rows
        return try await run { connection throws(FleetError) -> Int in
            var added = 0
            // One statement per 1,000 rows, as arrays: a parameterised multi-row insert.
            for start in stride(from: 0, to: allRows.count, by: 1000) {
                let chunk = allRows[start..<min(start + 1000, allRows.count)]
                let columns = (0..<5).map { column in FleetSchema.array(chunk.map { $0[column] }) }
                let inserted = try connection.query(
                    """
                    INSERT INTO haul_downloads (id, url, destination, host, priority)
                    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[])
                    ON CONFLICT (id) DO NOTHING RETURNING 1
                    """,
                    columns
                )
                added += inserted.count
            }
            // Fresh statistics after a large batch: without them the planner took the queue for a
            // few rows and sorted all of it for every claim (24 ms instead of 4 for 20,000 rows).
            if added >= 1000 { try connection.query("ANALYZE haul_downloads") }
            return added
        }
    }

    /// Checks `requests` as ``enqueue(_:relativeTo:)`` does, before anything is sent: a usage error
    /// (a URL Haul cannot download, credentials or headers, a name that leaves `folder`) is found
    /// without a database.
    public static func check(_ requests: [DownloadRequest], relativeTo folder: URL) throws(FleetError) {
        _ = try rows(for: requests, relativeTo: folder, target: "the queue")
    }

    /// The rows `requests` become, relative to `folder`, or the first one's refusal.
    static func rows(
        for requests: [DownloadRequest],
        relativeTo folder: URL,
        byRelativePath: Bool = true,
        target: String
    ) throws(FleetError) -> [[String?]] {
        let root = folder.standardizedFileURL.path
        let base = root.hasSuffix("/") ? root : root + "/"
        var rows: [[String?]] = []
        for request in requests {
            guard request.url.user == nil, request.url.password == nil, request.headers.isEmpty else {
                throw FleetError(
                    .invalidArgument,
                    target: target,
                    detail:
                        "\(DownloadRequest.redacted(request.url)) carries credentials or headers, which a shared queue never stores"
                )
            }
            let unsupported = [
                ("a checksum", request.checksum != nil), ("an expected size", request.expectedSize != nil),
                ("a user agent", request.userAgent != nil),
                ("a file name from the server", request.takesFileNameFromServer),
                ("a key", request.key != nil), ("a rate limit", request.maxBytesPerSecond != nil),
                ("connections", request.connections != nil), ("mirrors", !request.mirrors.isEmpty),
            ].filter(\.1).map(\.0)
            guard unsupported.isEmpty else {
                throw FleetError(
                    .invalidArgument,
                    target: target,
                    detail:
                        "\(DownloadRequest.redacted(request.url)) asks for \(unsupported.joined(separator: ", ")), which the fleet queue does not carry yet"
                )
            }
            guard request.destination.isFileURL else {
                throw FleetError(.invalidArgument, target: target, detail: "\(request.destination) is not a file path")
            }
            do {
                _ = try DownloadRequest.checkedURL(request.url)
            } catch {
                throw FleetError(.invalidArgument, target: target, detail: "\(error)")
            }
            var path = request.destination.standardizedFileURL.path
            guard path.hasPrefix(base), path.count > base.count else {
                throw FleetError(.invalidArgument, target: target, detail: "\(path) is not inside \(base)")
            }
            path.removeFirst(base.count)
            if let refusal = ConfinedPath.refusal(path) {
                throw FleetError(.invalidArgument, target: target, detail: "the destination \(path) \(refusal)")
            }
            // Queued by a folder named here: the relative path's id, whoever queues it; else the
            // request's own, as its caller knows it.
            let id = !byRelativePath ? request.id : DownloadID(destination: URL(fileURLWithPath: "/" + path))
            rows.append([id.rawValue, request.url.absoluteString, path, request.hostKey, String(request.priority)])
        }
        return rows
    }
}
