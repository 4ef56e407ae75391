import Foundation
import Glibc
import Synchronization
import Testing

@testable import Haul
@testable import HaulTestSupport

/// Issue 76, item 3: the loop writes the rows callers ask for, in a transaction of their own, and
/// answers each call once its rows are durable. A write the disk refuses is answered with why, and
/// nothing of it is kept: no row, no handle, no file.
@Suite("Rows written by the loop", .timeLimit(.minutes(2)))
struct RowWriteTests {
    /// A request whose row needs pages of its own: many long mirror URLs (a row holds them all).
    func largeRequest(_ server: NginxServer, to destination: URL) -> DownloadRequest {
        var request = DownloadRequest(url: server.url("r.bin?large"), destination: destination)
        request.mirrors = (0..<200).map { index in
            URL(string: server.url("r.bin").absoluteString + "?mirror\(index)=" + String(repeating: "m", count: 1_000))!
        }
        return request
    }

    @Test(
        "a download or a run of enqueued rows the full disk refuses is answered with why, nothing kept; with space again the same requests download whole"
    )
    func fullDiskAnswersTheCaller() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("r.bin", size: 20_000, seed: 11)
        try await withSmallDisk(megabytes: 4) { disk in
            var configuration = DownloadManager.Configuration.forTests()
            configuration.stateDirectory = disk.appendingPathComponent("state")
            try await withDownloadManager(configuration: configuration) { manager in
                // The journal exists and works.
                let first = directory.appendingPathComponent("first.bin")
                #expect(try await manager.download(from: server.url("r.bin"), to: first).finished() == first)

                try fill(disk, leaving: 0)
                let large = directory.appendingPathComponent("large.bin")
                let request = largeRequest(server, to: large)
                do {
                    _ = try manager.download(request)
                    Issue.record("the row of a large request was written on a full disk")
                } catch let error as DownloadError {
                    #expect(error.errno == ENOSPC, "\(error)")
                    #expect(error.url == request.url.absoluteString, "\(error)")
                }
                let long = String(repeating: "r", count: 1_000)
                let runs = (0..<100).map { index in
                    DownloadRequest(
                        url: URL(string: server.url("r.bin").absoluteString + "?run\(index)=" + long)!,
                        destination: directory.appendingPathComponent("run-\(index).bin")
                    )
                }
                do {
                    let summary = try manager.enqueue(runs)
                    Issue.record("a run of 100 large rows was written on a full disk: \(summary)")
                } catch let error as DownloadError {
                    #expect(error.errno == ENOSPC, "\(error)")
                }
                // Nothing of either is kept: no row to list, no handle, no file.
                #expect(manager.downloads.isEmpty)
                #expect(manager.download(id: request.id) == nil)
                #expect(!FileManager.default.fileExists(atPath: large.path))

                // Space again: the same requests are written, and download whole.
                try unfill(disk)
                #expect(try await manager.download(request).finished() == large)
                #expect(try Data(contentsOf: large) == source)
                #expect(try manager.enqueue(runs).queued == runs.count)
                await manager.waitUntilIdle()
                for index in 0..<runs.count {
                    let file = directory.appendingPathComponent("run-\(index).bin")
                    #expect(try Data(contentsOf: file) == source, "run-\(index).bin")
                }
            }
        }
    }

    @Test(
        "callers on 16 threads at once, 20 downloads each: every call answered with its own download, every file whole"
    )
    func manyCallersAtOnce() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("c.bin", size: 8_000, seed: 5)
        let (threads, each) = (16, 20)
        try await withDownloadManager(configuration: .forTests()) { manager throws in
            let asked = Mutex<[(String, Download)]>([])
            let failures = Mutex<[String]>([])
            let done = DispatchSemaphore(value: 0)
            for thread in 0..<threads {
                Thread {
                    for index in 0..<each {
                        let name = "c-\(thread)-\(index).bin"
                        do {
                            let download = try manager.download(
                                from: server.url("c.bin?\(thread)-\(index)"),
                                to: directory.appendingPathComponent(name)
                            )
                            asked.withLock { $0.append((name, download)) }
                        } catch {
                            failures.withLock { $0.append("\(name): \(error)") }
                        }
                    }
                    done.signal()
                }.start()
            }
            await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
                Thread {
                    for _ in 0..<threads { done.wait() }
                    finished.resume()
                }.start()
            }
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
            let downloads = asked.withLock { $0 }
            #expect(downloads.count == threads * each)
            #expect(Set(downloads.map { ObjectIdentifier($0.1) }).count == threads * each)
            for (name, download) in downloads {
                #expect(try await download.finished() == directory.appendingPathComponent(name))
                #expect(try Data(contentsOf: directory.appendingPathComponent(name)) == source, "\(name)")
            }
            #expect(manager.downloads.isEmpty)
        }
    }
}
