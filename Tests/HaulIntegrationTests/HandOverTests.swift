import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// ``DownloadManager/handOver(_:to:)``: a manager that runs on gives paused downloads to another one
/// (a fleet worker whose lease was taken while it still ran), through a folder no manager runs on.
@Suite("Handing paused downloads over to another manager", .timeLimit(.minutes(2)))
struct HandOverTests {
    /// As the take-over tests configure their managers (a state directory, nothing resumed at start).
    func configuration(_ state: URL) -> DownloadManager.Configuration { TakeOverTests().configuration(state) }

    @Test(
        "a paused download's row and bytes go to the folder and leave the giver, whose handle ends cancelled; the taker continues with If-Range"
    )
    func pausedDownloadMoves() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 2 * 1024 * 1024
        let source = try server.makeFile("h.bin", size: size, seed: 17)
        let request = DownloadRequest(
            url: server.url("gated/h.bin"),
            destination: directory.appendingPathComponent("h.bin")
        )
        let giverState = directory.appendingPathComponent("state/giver")
        let handOver = giverState.appendingPathComponent("handover")
        try await withDownloadManager(configuration: configuration(giverState)) { giver in
            let download = try giver.download(request)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 512 * 1024 } else { false } }
            // Running: left alone.
            #expect(try giver.handOver([request.id], to: handOver).isEmpty)
            guard let progress = await events.pause(download) else { return }
            let handed = try giver.handOver([request.id], to: handOver)
            #expect(handed == [request.id: progress.bytesReceived])
            let after = await events.next()
            #expect(after == .cancelled)
            #expect(download.state == .cancelled)
            // Gone from the giver, which runs on; whole in the folder.
            #expect(giver.journalEntry(id: request.id) == nil)
            #expect(
                !FileManager.default.fileExists(atPath: giverState.appendingPathComponent("\(request.id).part").path)
            )
            let entry = try #require(DownloadManager.journalEntry(id: request.id, stateDirectory: handOver))
            #expect(entry.state == .paused && entry.bytesReceived == progress.bytesReceived)
            // A second hand-over finds nothing to give.
            #expect(try giver.handOver([request.id], to: handOver).isEmpty)

            // Another manager takes it while the giver still runs, and continues from those bytes.
            try await withDownloadManager(configuration: configuration(directory.appendingPathComponent("state/taker")))
            {
                taker in
                let taken = try taker.takeOver([request], from: handOver)
                #expect(taken == [request.id: progress.bytesReceived])
                let file = try await taker.download(request).finished()
                #expect(file == request.destination)
            }
            #expect(try Data(contentsOf: request.destination) == source)
            let resumed = await server.requests(to: "/gated/h.bin", atLeast: 2)
            #expect(resumed.count == 2)
            #expect(resumed.last?.range == "bytes=\(progress.bytesReceived)-" && resumed.last?.status == 206)
            #expect(try DownloadManager.journalEntries(stateDirectory: handOver).isEmpty)
        }
    }

    @Test("what nobody took is removed from the folder, row and partial file; a live manager's folder refuses")
    func removeWhatNobodyTook() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("r.bin", size: 2 * 1024 * 1024, seed: 18)
        let request = DownloadRequest(
            url: server.url("gated/r.bin"),
            destination: directory.appendingPathComponent("r.bin")
        )
        let giverState = directory.appendingPathComponent("state/giver")
        let handOver = giverState.appendingPathComponent("handover")
        try await withDownloadManager(configuration: configuration(giverState)) { giver in
            let download = try giver.download(request)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
            await events.pause(download)
            #expect(try giver.handOver([request.id], to: handOver)[request.id].map { $0 > 0 } == true)
            #expect(FileManager.default.fileExists(atPath: handOver.appendingPathComponent("\(request.id).part").path))
            // The giver's own folder is not one to hand over to, nor to remove from, while it runs.
            #expect {
                try DownloadManager.removeDownloads([request.id], stateDirectory: giverState)
            } throws: { ($0 as? DownloadError)?.code == .journalLocked }
        }
        #expect(
            try DownloadManager.removeDownloads([request.id, DownloadID(rawValue: "none")], stateDirectory: handOver)
                == 1
        )
        #expect(!FileManager.default.fileExists(atPath: handOver.appendingPathComponent("\(request.id).part").path))
        #expect(try DownloadManager.journalEntries(stateDirectory: handOver).isEmpty)
    }
}
