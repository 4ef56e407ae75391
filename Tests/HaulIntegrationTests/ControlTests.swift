import CHaul
import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 58, item 3: controls that settle. Awaited, `pause()`, `resume()` and `cancel()` return
/// once what they asked for holds, with the state it is in.
@Suite("Controls that settle", .timeLimit(.minutes(2)))
struct ControlTests {
    /// A stall timeout the gate's hold cannot reach however loaded the machine (with the suite on
    /// two cores, 10 s was reached, and the retries' requests counted against the test).
    func configuration(_ directory: URL) -> DownloadManager.Configuration {
        var configuration = FaultTests().patient(directory)
        configuration.stallTimeout = .seconds(300)
        return configuration
    }

    /// A download held by the fault server at 256 KiB of 1 MiB until the gate opens, once it has
    /// bytes. (Not "once it has 256 KiB": progress is coalesced, and the last bytes before the hold
    /// may have no event of their own.)
    func heldDownload(_ manager: DownloadManager, _ server: FaultServer, into directory: URL) async throws -> Download {
        let download = try manager.download(
            from: server.url("gate-at/262144/1048576"),
            to: directory.appendingPathComponent("held.bin")
        )
        var events = download.events.makeAsyncIterator()
        await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
        return download
    }

    /// The bytes `download`'s row records as synced, read from its journal as another process would
    /// (read-only; the manager keeps it open).
    static func syncedBytes(of download: Download, in stateDirectory: URL) -> Int64? {
        var database: OpaquePointer?
        let path = stateDirectory.appendingPathComponent(Journal.fileName).path
        defer { sqlite3_close_v2(database) }
        guard sqlite3_open_v2(path, &database, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return nil }
        sqlite3_busy_timeout(database, 10_000)
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard
            sqlite3_prepare_v2(database, "SELECT bytes_synced FROM downloads WHERE id = ?1", -1, &statement, nil)
                == SQLITE_OK
        else { return nil }
        download.id.rawValue.withCString { _ = CHaul_sqlite_bind_text(statement, 1, $0) }
        guard sqlite3_step(statement) == SQLITE_ROW else { return nil }
        return sqlite3_column_int64(statement, 0)
    }

    @Test(
        "await pause() returns with the download paused, its bytes on disk, in its row and synced; await resume() once it is queued again"
    )
    func pauseAndResume() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: configuration(directory)) { manager in
                let download = try await heldDownload(manager, server, into: directory)
                let paused = await download.pause()
                #expect(paused == .paused && download.state == .paused, "\(paused); \(download.state)")
                // The row says paused with the bytes the partial file holds: synced and recorded
                // before the call returned.
                let entry = try #require(manager.journalEntry(id: download.id))
                let partial = directory.appendingPathComponent("state/\(download.id).part").path
                let length = try #require(try FileManager.default.attributesOfItem(atPath: partial)[.size] as? Int)
                #expect(entry.state == .paused && entry.bytesReceived == Int64(length) && length > 0, "\(entry)")
                // And as durable: the pause's sync reported and recorded before the call returned
                // (answered at the pause's own turn, the row would say the bytes but not yet synced).
                let synced = Self.syncedBytes(of: download, in: directory.appendingPathComponent("state"))
                #expect(synced == Int64(length), "synced \(String(describing: synced)) of \(length)")
                // Paused again: nothing to do, the same answer.
                #expect(await download.pause() == .paused)
                let resumed = await download.resume()
                #expect(resumed != .paused && download.state != .paused, "\(resumed)")
                server.openGate()
                #expect(try await download.finished() == directory.appendingPathComponent("held.bin"))
                #expect(
                    try Data(contentsOf: directory.appendingPathComponent("held.bin"))
                        == FaultServer.body(size: 1_048_576)
                )
                // Resumed from the bytes kept.
                let ranges = server.requests(to: "/gate-at/262144/1048576").map(\.range)
                #expect(ranges.count == 2 && ranges[1] == "bytes=\(length)-", "\(ranges)")
                // A control on a download that ended changes nothing and says how it ended.
                #expect(await download.pause() == .completed(directory.appendingPathComponent("held.bin")))
                #expect(await download.cancel() == .completed(directory.appendingPathComponent("held.bin")))
            }
        }
    }

    /// The cancel that returns at once (``Download/cancel()``, the synchronous form).
    func cancelWithoutWaiting(_ download: Download) { download.cancel() }

    @Test(
        "a body handed off and cancelled in one wake of the loop: its row is written first, then cancelled; no request goes out"
    )
    func handOffThenCancelInOneWake() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: configuration(directory)) { manager in
                // The loop held inside a command of its own until both of the caller's have arrived:
                // it takes them in one wake, in the order they were sent.
                // (The loop blocks on the gate, on its own thread; the test's task only awaits.)
                let gate = DispatchSemaphore(value: 0)
                await withCheckedContinuation { (inside: CheckedContinuation<Void, Never>) in
                    DispatchQueue.global().async {
                        _ = manager.queue.lookOnLoop {
                            inside.resume()
                            gate.wait()
                        }
                    }
                }
                // Handed off: the row is written by the loop, and the caller does not wait for it.
                let download = try manager.discard(from: server.url("file/100000"))
                cancelWithoutWaiting(download)
                gate.signal()
                await #expect(throws: DownloadError.self) { try await download.finished() }
                #expect(download.state == .cancelled, "\(download.state)")
                #expect(server.requests(to: "/file/100000").isEmpty)
            }
        }
    }

    @Test("await cancel() returns with the download cancelled, its partial file gone, its row saying cancelled")
    func cancelSettles() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: configuration(directory)) { manager in
                let download = try await heldDownload(manager, server, into: directory)
                #expect(await download.cancel() == .cancelled)
                #expect(download.state == .cancelled)
                // The row stays for listings, with nothing fetched kept.
                let entry = try #require(manager.journalEntry(id: download.id))
                #expect(entry.state == .cancelled && entry.bytesReceived == 0 && entry.totalBytes == nil, "\(entry)")
                #expect(
                    !FileManager.default.fileExists(
                        atPath: directory.appendingPathComponent("state/\(download.id).part").path
                    )
                )
                await #expect(throws: DownloadError.self) { _ = try await download.finished() }
                server.openGate()
            }
        }
    }

    @Test(
        "a paused download cancelled: its row says cancelled, its partial is gone, a new manager leaves it, asked again it starts anew"
    )
    func cancelPausedThenAskAgain() async throws {
        try await withFaultServer { server, directory in
            let destination = directory.appendingPathComponent("held.bin")
            let partial = directory.appendingPathComponent("state/\(DownloadID(destination: destination)).part").path
            try await withDownloadManager(configuration: configuration(directory)) { manager in
                let download = try await heldDownload(manager, server, into: directory)
                #expect(await download.pause() == .paused)
                #expect(FileManager.default.fileExists(atPath: partial))
                // Not admitted: the scheduler writes the row itself.
                #expect(await download.cancel() == .cancelled)
                let entry = try #require(manager.journalEntry(id: download.id))
                #expect(entry.state == .cancelled && entry.bytesReceived == 0, "\(entry)")
                #expect(!FileManager.default.fileExists(atPath: partial))
            }
            server.openGate()
            try await withDownloadManager(configuration: configuration(directory)) { manager in
                // Restored downloads are the unfinished ones: a cancelled one is not among them.
                let listed = try DownloadManager.journalEntries(
                    stateDirectory: directory.appendingPathComponent("state", isDirectory: true)
                )
                #expect(listed.map(\.state) == [.cancelled], "\(listed)")
                #expect(manager.downloads.isEmpty)
                let again = try manager.download(from: server.url("gate-at/262144/1048576"), to: destination)
                #expect(try await again.finished() == destination)
                #expect(manager.journalEntry(id: again.id)?.state == .completed)
            }
            #expect(try Data(contentsOf: destination) == FaultServer.body(size: 1_048_576))
            let ranges = server.requests(to: "/gate-at/262144/1048576").map(\.range)
            #expect(ranges.count == 2 && ranges[1] == nil, "asked again from its first byte: \(ranges)")
        }
    }

    @Test(
        "a download waiting for a slot: paused and resumed at once; a manager shut down answers with the state it left"
    )
    func queuedAndShutDown() async throws {
        try await withFaultServer { server, directory in
            var oneAtATime = configuration(directory)
            oneAtATime.maxConcurrentDownloads = 1
            let manager = try DownloadManager(configuration: oneAtATime)
            let first = try await heldDownload(manager, server, into: directory)
            let waiting = try manager.download(
                from: server.url("file/5000"),
                to: directory.appendingPathComponent("waiting.bin")
            )
            #expect(waiting.state == .queued)
            #expect(await waiting.pause() == .paused && waiting.state == .paused)
            #expect(await waiting.resume() == .queued)
            server.openGate()
            await manager.shutdown()
            // Shut down: nothing carries a control out; each answers with the state it is in.
            let state = await first.pause()
            #expect(state == first.state && (state == .paused || state.isFinal), "\(state)")
        }
    }
}
