import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// ``DownloadManager/takeOver(_:from:)``: a manager continues the downloads another one left in its
/// state directory (a fleet's worker that died, its state on storage the others share).
@Suite("Taking over another state directory's downloads", .timeLimit(.minutes(2)))
struct TakeOverTests {
    func configuration(_ state: URL) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration.forTests()
        configuration.stateDirectory = state
        configuration.resumesUnfinishedDownloads = false
        return configuration
    }

    /// Starts `requests` in a manager on `state`, waits until each has `bytes`, and shuts it down
    /// (its downloads paused there): what each had.
    func leaveBehind(_ requests: [DownloadRequest], in state: URL, after bytes: Int64) async throws -> [Int64] {
        let manager = try DownloadManager(configuration: configuration(state))
        var had: [Int64] = []
        for request in requests {
            let download = try manager.download(request)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived >= bytes } else { false } }
            guard let progress = await events.pause(download) else { return [] }
            had.append(progress.bytesReceived)
        }
        await manager.shutdown()
        return had
    }

    @Test(
        "two managers take over a gone one's downloads at once: each continues from the bytes left, with If-Range, byte-identical"
    )
    func takeOverFromAGoneManager() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 3 * 1024 * 1024
        let sources = try (0..<2).map { try server.makeFile("t\($0).bin", size: size, seed: UInt64(7 + $0)) }
        let requests = (0..<2).map {
            DownloadRequest(
                url: server.url("gated/t\($0).bin"),
                destination: directory.appendingPathComponent("t\($0).bin")
            )
        }
        let gone = directory.appendingPathComponent("state/gone")
        let had = try await leaveBehind(requests, in: gone, after: 256 * 1024)
        #expect(had.count == 2 && had.allSatisfy { $0 >= 256 * 1024 && $0 < Int64(size) })

        let states = ["b", "c"].map { directory.appendingPathComponent("state/\($0)") }
        let managers = try states.map { try DownloadManager(configuration: configuration($0)) }
        // At once, from two threads: they wait for each other on the gone directory, and both get theirs.
        let taken = try await withThrowingTaskGroup(of: (Int, [DownloadID: Int64]).self) { group in
            for index in 0..<2 {
                group.addTask { [managers, requests] in
                    (index, try managers[index].takeOver([requests[index]], from: gone))
                }
            }
            return try await group.reduce(into: [Int: [DownloadID: Int64]]()) { $0[$1.0] = $1.1 }
        }
        for index in 0..<2 {
            #expect(taken[index] == [requests[index].id: had[index]])
            // The partial file moved; the gone journal forgot the row.
            #expect(
                !FileManager.default.fileExists(atPath: gone.appendingPathComponent("\(requests[index].id).part").path)
            )
            #expect(
                FilePath.fileLength(states[index].appendingPathComponent("\(requests[index].id).part").path)
                    == had[index]
            )
        }
        #expect(try DownloadManager.journalEntries(stateDirectory: gone).isEmpty)
        // Taken once: asking again finds nothing left there.
        #expect(try managers[0].takeOver(requests, from: gone).isEmpty)

        for index in 0..<2 {
            let download = try managers[index].download(requests[index])
            #expect(try await download.finished() == requests[index].destination)
            #expect(try Data(contentsOf: requests[index].destination) == sources[index])
            let sent = await server.requests(to: "/gated/t\(index).bin", atLeast: 2)
            #expect(sent.count == 2)
            let resumed = sent.last
            #expect(resumed?.range == "bytes=\(had[index])-")
            // nginx's ETag, "<mtime>-<length>" in hex (its log writes the quotes as \x22).
            #expect(
                resumed?.ifRange.contains("-\(String(size, radix: 16))") == true,
                "If-Range: \(resumed?.ifRange ?? "")"
            )
            #expect(resumed?.status == 206)
            #expect(resumed?.bytesSent == Int64(size) - had[index])
        }
        for manager in managers { await manager.shutdown() }
    }

    @Test("a download the gone manager completed moves as completed while its file is unchanged: nothing is sent again")
    func completedMovesWhileIntact() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let sources = try (0..<2).map { try server.makeFile("d\($0).bin", size: 200_000, seed: UInt64(30 + $0)) }
        let requests = (0..<2).map {
            DownloadRequest(url: server.url("d\($0).bin"), destination: directory.appendingPathComponent("d\($0).bin"))
        }
        let gone = directory.appendingPathComponent("state/gone")
        try await withDownloadManager(configuration: configuration(gone)) { manager in
            for request in requests { _ = try await manager.download(request).finished() }
        }
        // The second file changed since it was placed: that one is not taken as complete.
        try Data("changed".utf8).write(to: requests[1].destination)
        try await withDownloadManager(configuration: configuration(directory.appendingPathComponent("state/b"))) {
            manager in
            let taken = try manager.takeOver(requests, from: gone)
            #expect(taken == [requests[0].id: 200_000])
            for request in requests {
                let file = try await manager.download(request).finished()
                #expect(file == request.destination)
            }
        }
        for index in 0..<2 {
            #expect(try Data(contentsOf: requests[index].destination) == sources[index])
        }
        #expect(server.accessLog().filter { $0.uri == "/d0.bin" }.count == 1)
        #expect(await server.requests(to: "/d1.bin", atLeast: 2).count == 2)
    }

    @Test("a journal last written in another boot (another machine) gives only its synced bytes")
    func anotherBootCutsBackToSynced() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 2 * 1024 * 1024
        let source = try server.makeFile("boot.bin", size: size, seed: 21)
        let request = DownloadRequest(
            url: server.url("gated/boot.bin"),
            destination: directory.appendingPathComponent("boot.bin")
        )
        let gone = directory.appendingPathComponent("state/gone")
        let had = try await leaveBehind([request], in: gone, after: 300 * 1024)
        #expect(had.first ?? 0 >= 300 * 1024)
        // As the gone machine left it: its boot, and fewer bytes synced than written.
        let synced: Int64 = 100_000
        do {
            let journal = try Journal(directory: gone.path, bootID: "the-gone-machine")
            var record = try #require(try journal.record(for: request.id.engine))
            record.bytesSynced = synced
            try journal.save(record, for: request.id.engine)
            journal.close()
        }
        try await withDownloadManager(configuration: configuration(directory.appendingPathComponent("state/b"))) {
            manager in
            let taken = try manager.takeOver([request], from: gone)
            #expect(taken == [request.id: synced])
            let file = try await manager.download(request).finished()
            #expect(file == request.destination)
        }
        #expect(try Data(contentsOf: request.destination) == source)
        let resumed = await server.requests(to: "/gated/boot.bin", atLeast: 2).last
        #expect(resumed?.range == "bytes=\(synced)-")
        #expect(resumed?.status == 206)
    }

    @Test("a manager still running on the directory refuses; its download goes on")
    func aLiveManagerRefuses() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("live.bin", size: 1024 * 1024 + 16 * 1024, seed: 5)  // 1 s after the gate
        let request = DownloadRequest(
            url: server.url("gated/live.bin"),
            destination: directory.appendingPathComponent("live.bin")
        )
        let live = directory.appendingPathComponent("state/live")
        try await withDownloadManager(configuration: configuration(live)) { owner in
            let download = try owner.download(request)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
            try await withDownloadManager(configuration: configuration(directory.appendingPathComponent("state/b"))) {
                other in
                #expect {
                    try other.takeOver([request], from: live)
                } throws: { error in
                    (error as? DownloadError)?.code == .journalLocked
                }
            }
            #expect(try await download.finished() == request.destination)
        }
        #expect(try Data(contentsOf: request.destination) == source)
        // And a folder where no manager ever ran is nothing to take (and is not created).
        let nowhere = directory.appendingPathComponent("state/nowhere")
        try await withDownloadManager(configuration: configuration(directory.appendingPathComponent("state/c"))) {
            manager in
            let taken = try manager.takeOver([request], from: nowhere)
            #expect(taken.isEmpty)
        }
        #expect(!FileManager.default.fileExists(atPath: nowhere.path))
    }
}
