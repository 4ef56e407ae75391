import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// A download's waiters are resumed at the end of the loop's turn, after the turn's rows are
/// committed (issue 61): whoever hears that a download completed finds it completed in the journal,
/// from any connection to it, as a process started next would.
@Suite("What a waiter finds when it is resumed", .timeLimit(.minutes(1)))
struct WaiterOrderTests {
    /// Runs 40 downloads (every fourth answered 404, none retried) with a task each that learns its
    /// outcome by `outcome`, then reads its row through a connection of its own; checks that each
    /// read found the outcome recorded, and each completed file whole.
    func fortyDownloads(learning outcome: @escaping @Sendable (Download) async -> Void) async throws {
        try await withFaultServer { server, directory in
            let state = directory.appendingPathComponent("state")
            var configuration = DownloadManager.Configuration()
            configuration.stateDirectory = state
            configuration.maxConcurrentDownloads = 20
            configuration.retryLimit = 0
            // Every fourth answers 404: a failure is recorded before its waiter hears of it too.
            func fails(_ index: Int) -> Bool { index % 4 == 3 }
            try await withDownloadManager(configuration: configuration) { manager in
                let downloads = try (0..<40).map { index in
                    try manager.download(
                        from: server.url(fails(index) ? "status/404" : "file/\(1000 + index)"),
                        to: directory.appendingPathComponent("\(index).bin")
                    )
                }
                let found = await withTaskGroup(of: (Int, HaulIO.QueueState?).self) { group in
                    for (index, download) in downloads.enumerated() {
                        group.addTask {
                            await outcome(download)
                            // Read at once, through a connection of its own: only what is committed.
                            let entries = (try? Journal.entries(directory: state.path)) ?? []
                            return (index, entries.first { $0.id == download.id.engine }?.record.state)
                        }
                    }
                    return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
                }
                #expect(found.count == 40)
                for index in 0..<40 {
                    #expect(found[index] == (fails(index) ? .failed : .completed), "download \(index)")
                    if !fails(index) {
                        let bytes = try Data(contentsOf: directory.appendingPathComponent("\(index).bin"))
                        #expect(bytes == FaultServer.body(size: 1000 + index))
                    }
                }
            }
        }
    }

    @Test(
        "once finished() returns or throws, another connection to the journal reads the download completed or failed (40 at once)"
    )
    func finishedAfterCommit() async throws {
        // A task that calls finished() after the final event was published and before the turn
        // committed was answered at once (12 failures in 40 runs).
        try await fortyDownloads { download in _ = try? await download.finished() }
    }

    @Test(
        "once a reader of a download's events gets its final event, another connection to the journal reads it completed or failed (40 at once)"
    )
    func finalEventAfterCommit() async throws {
        // Subscribed whenever its task runs: before the end, or after it (a late reader's first event
        // is the final one). 25 failures in 30 runs before the final event waited for the commit.
        try await fortyDownloads { download in
            for await event in download.events {
                switch event {
                case .completed, .failed, .cancelled: return
                default: continue
                }
            }
        }
    }
}
