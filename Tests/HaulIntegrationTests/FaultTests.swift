import Foundation
import Glibc
import Synchronization
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// Every misbehaviour of ``FaultServer``, with what Haul must make of it: the whole file,
/// byte-identical, or a clear failure, never a wrong file at the destination.
@Suite("Faults", .timeLimit(.minutes(2)))
struct FaultTests {
    func configuration(_ directory: URL, retryLimit: Int = 3) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.bufferSize = 16 * 1024
        configuration.retryLimit = retryLimit
        configuration.retryDelay = .milliseconds(10)
        configuration.maximumRetryDelay = .milliseconds(40)
        configuration.stallTimeout = .seconds(1)
        configuration.progressInterval = .milliseconds(20)
        return configuration
    }

    /// ``configuration(_:retryLimit:)`` with a stall timeout that no loaded machine reaches: for tests
    /// that expect a body cut short, not a stall. (With 1 s, a full suite on two busy cores once
    /// starved the fault server long enough that the last attempt failed as stalled, curl error 28.)
    func patient(_ directory: URL) -> DownloadManager.Configuration {
        var configuration = configuration(directory)
        configuration.stallTimeout = .seconds(10)
        return configuration
    }

    /// Downloads `path` to `directory/out` and returns every event and the outcome.
    func fetch(
        _ path: String,
        from server: FaultServer,
        into directory: URL,
        configuration: DownloadManager.Configuration
    ) async throws -> (events: [DownloadEvent], result: Result<URL, DownloadError>) {
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(from: server.url(path), to: directory.appendingPathComponent("out"))
            var events: [DownloadEvent] = []
            for await event in download.events { events.append(event) }
            do {
                return (events, .success(try await download.finished()))
            } catch let error as DownloadError {
                return (events, .failure(error))
            }
        }
    }

    func retries(in events: [DownloadEvent]) -> [(DownloadError, Duration)] {
        events.compactMap { if case .waitingToRetry(let error, let delay) = $0 { (error, delay) } else { nil } }
    }

    func restarts(in events: [DownloadEvent]) -> [RestartReason] {
        events.compactMap { if case .restarted(let reason) = $0 { reason } else { nil } }
    }

    @Test("a server that drops the connection every 50 KB: each retry resumes where the bytes end")
    func droppedConnections() async throws {
        try await withFaultServer { server, directory in
            // Eight attempts, far more than the budget of 2: each one makes progress, so none counts.
            let (events, result) = try await fetch(
                "drop/50000/400000",
                from: server,
                into: directory,
                configuration: configuration(directory, retryLimit: 2)
            )
            #expect(try result.get() == directory.appendingPathComponent("out"))
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 400_000))
            let requests = server.requests(to: "/drop/50000/400000")
            #expect(requests.map(\.range) == [nil] + (1..<8).map { "bytes=\($0 * 50_000)-" })
            #expect(requests.dropFirst().allSatisfy { $0.ifRange == "\"v1-400000\"" })
            #expect(requests.map(\.status) == [200] + Array(repeating: 206, count: 7))
            // A reader that falls behind may miss state changes (never the final one): at most 7.
            #expect((1...7).contains(retries(in: events).count))
            #expect(retries(in: events).allSatisfy { $0.0.code == .sizeMismatch || $0.0.code == .transport })
            #expect(restarts(in: events).isEmpty)
        }
    }

    @Test(
        "a restored download's header values, from the provider, are kept for its retries here: asked once over eight attempts"
    )
    func providedHeadersKeptForRetries() async throws {
        try await withFaultServer { server, directory in
            let destination = directory.appendingPathComponent("out")
            // A first process: one attempt cut at 50 KB, paused while it waits to retry. Its row keeps
            // the header's name, never its value.
            var first = configuration(directory)
            first.retryDelay = .seconds(60)
            first.maximumRetryDelay = .seconds(60)
            let id = try await withDownloadManager(configuration: first) { manager in
                let download = try manager.download(
                    DownloadRequest(
                        url: server.url("drop/50000/400000"),
                        destination: destination,
                        headers: [.authorization(bearer: "t0ken-kept")]
                    )
                )
                var events = download.events.makeAsyncIterator()
                await events.next { if case .waitingToRetry = $0 { true } else { false } }
                #expect(await download.pause() == .paused)
                return download.id
            }
            let asked = Mutex(0)
            var second = configuration(directory, retryLimit: 2)
            second.headerProvider = { _ in
                asked.withLock { $0 += 1 }
                return [.authorization(bearer: "t0ken-kept")]
            }
            try await withDownloadManager(configuration: second) { manager in
                let restored = try #require(manager.download(id: id))
                await restored.resume()
                #expect(try await restored.finished() == destination)
            }
            #expect(try Data(contentsOf: destination) == FaultServer.body(size: 400_000))
            // Seven attempts here, each cut at its 50 KB: the values asked for at the first are kept
            // for the others.
            #expect(server.requests(to: "/drop/50000/400000").count == 8)
            #expect(asked.withLock { $0 } == 1)
            // The value was kept in memory only: nothing under the folder (the journal) holds it.
            #expect(everyByte(under: directory).range(of: Data("t0ken-kept".utf8)) == nil)
        }
    }

    @Test("a connection cut after 100 KB is followed at once; one cut after 20 KB waits for the backoff")
    func retryPaceFollowsWhatWasServed() async throws {
        try await withFaultServer { server, directory in
            var configuration = configuration(directory)
            configuration.retryDelay = .milliseconds(400)
            configuration.maximumRetryDelay = .seconds(2)
            // Each attempt brings 100 KB (at least 64 KiB): within a tenth of the base delay.
            let served = try await fetch(
                "drop/100000/300000",
                from: server,
                into: directory,
                configuration: configuration
            )
            #expect(try Data(contentsOf: try served.result.get()) == FaultServer.body(size: 300_000))
            #expect(!retries(in: served.events).isEmpty)
            #expect(retries(in: served.events).allSatisfy { $0.1 < .milliseconds(40) }, "\(retries(in: served.events))")
            try FileManager.default.removeItem(at: directory.appendingPathComponent("out"))
            // Each attempt brings 20 KB: progress (the count of failures starts again), but a backoff.
            let scant = try await fetch("drop/20000/60000", from: server, into: directory, configuration: configuration)
            #expect(try Data(contentsOf: try scant.result.get()) == FaultServer.body(size: 60_000))
            #expect(!retries(in: scant.events).isEmpty)
            #expect(retries(in: scant.events).allSatisfy { $0.1 >= .milliseconds(200) }, "\(retries(in: scant.events))")
        }
    }

    @Test("a server that goes silent mid-body: the stall is detected, and the retry resumes")
    func stalledTransfer() async throws {
        try await withFaultServer { server, directory in
            let (events, result) = try await fetch(
                "stall/100000/300000",
                from: server,
                into: directory,
                configuration: configuration(directory)
            )
            #expect(throws: Never.self) { try result.get() }
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 300_000))
            let stalls = retries(in: events)
            #expect(stalls.count == 1)
            #expect(stalls.first?.0.curlCode == 28)
            #expect(server.requests(to: "/stall/100000/300000").map(\.range) == [nil, "bytes=100000-"])
        }
    }

    @Test("a stall is noticed within the stall timeout and a second (curl's own check averages over 5 s first)")
    func stallNoticedInTime() async throws {
        try await withFaultServer { server, directory in
            var configuration = patient(directory)
            configuration.stallTimeout = .seconds(2)
            let (events, result) = try await fetch(
                "stall/100000/300000",
                from: server,
                into: directory,
                configuration: configuration
            )
            _ = try result.get()
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 300_000))
            let stalls = retries(in: events)
            #expect(stalls.count == 1 && stalls.first?.0.curlCode == 28)
            #expect(
                stalls.first?.0.description.contains("no data arrived for 2 s (the stall timeout)") == true,
                "\(stalls)"
            )
            let requests = server.requests(to: "/stall/100000/300000")
            try #require(requests.count == 2)
            // Ended by Haul's own sweep, which the message names (curl's own check, which averages
            // over about five seconds first, says "Operation too slow"), not before the timeout:
            // from the first request (its 100,000 bytes take milliseconds) to the resume.
            let noticed = requests[1].arrival - requests[0].arrival
            #expect(noticed >= .seconds(2), "noticed after \(noticed)")
        }
    }

    @Test(
        "one of 4 connections stalls: it is ended within the stall timeout, and another fetches the rest of its segment"
    )
    func segmentStallNoticedInTime() async throws {
        try await withFaultServer { server, directory in
            var configuration = configuration(directory)  // a stall timeout of 1 s
            let log = CapturedLog()
            configuration.logger = log.logger
            configuration.connectionsPerFile = 4
            configuration.minimumSegmentSize = 128 * 1024
            let size = 2 * 1024 * 1024
            let (_, result) = try await fetch(
                "stall-segments/\(size)",
                from: server,
                into: directory,
                configuration: configuration
            )
            _ = try result.get()
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: size))
            let requests = server.requests(to: "/stall-segments/\(size)")
            let silent = try #require(requests.first { $0.closedAt != nil }, "\(requests.map(\.bytesSent))")
            #expect(silent.range != nil && silent.bytesSent == 64 * 1024)
            // Its 64 KiB take 20 ms; then 1 s of silence: the client closed it, by Haul's own sweep,
            // which the connection's failure names (curl's own check, which averages over about
            // five seconds first, closed it after 5 to 6 s and says "Operation too slow").
            let closedAfter = silent.closedAt! - silent.arrival
            #expect(closedAfter >= .seconds(1), "closed after \(closedAfter)")
            #expect(log.text.contains("no data arrived for 1 s (the stall timeout)"), "\(log.text.suffix(2000))")
            #expect(!log.text.contains("Operation too slow"))
        }
    }

    @Test("connections are closed on exec: a child process started meanwhile cannot keep one open")
    func socketsCloseOnExec() async throws {
        try await withFaultServer(own: "its sockets are counted by port") { server, directory in
            var configuration = configuration(directory)
            configuration.stallTimeout = .seconds(60)
            try await withDownloadManager(configuration: configuration) { manager in
                // Connected, and held there: the response goes silent after 100,000 bytes.
                let download = try manager.download(
                    from: server.url("stall/100000/300000"),
                    to: directory.appendingPathComponent("out")
                )
                var events = download.events.makeAsyncIterator()
                await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
                let sockets = Descriptors.connected(toPort: server.port)
                #expect(!sockets.isEmpty, "the transfer's socket was not found")
                for descriptor in sockets {
                    #expect(
                        fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0,
                        "descriptor \(descriptor) would outlive an exec"
                    )
                }
                await download.cancel()
            }
        }
    }

    @Test(
        "a low open-files limit: half of it transfers at once, a quarter stays open as partial files, every file arrives"
    )
    func openFilesLimit() async throws {
        try await withFaultServer(own: "its sockets are counted by port") { server, directory in
            var configuration = configuration(directory)
            configuration.maxConcurrentDownloads = 24
            configuration.openFilesLimitOverride = 24  // 12 transfers at once, 6 partial files open between writes
            configuration.bufferSize = 128 * 1024  // 2,048 bytes are slow for it: written through
            configuration.stallTimeout = .seconds(60)
            configuration.checkpointInterval = .seconds(3600)  // no sync opens a partial file meanwhile
            configuration.progressInterval = .zero
            let partials = configuration.stateDirectory!.path
            func openPartialFiles() -> Int { Descriptors.files(in: partials).filter { $0.hasSuffix(".part") }.count }
            // Each first request gets 2,048 bytes, then silence until the client lets go.
            let paths = (0..<24).map { "stall/2048/6144?\($0)" }
            try await withDownloadManager(configuration: configuration) { manager in
                let downloads = try paths.indices.map {
                    try manager.download(from: server.url(paths[$0]), to: directory.appendingPathComponent("\($0).bin"))
                }
                func waitForBytes(_ batch: ArraySlice<Download>) async {
                    for download in batch {
                        var events = download.events.makeAsyncIterator()
                        _ = await events.next {
                            switch $0 {
                            case .progress(let progress), .receiving(let progress): progress.bytesReceived == 2048
                            default: false
                            }
                        }
                    }
                }
                // The first twelve (first in, first out) hold every slot; the others wait, unrequested.
                await waitForBytes(downloads[0..<12])
                #expect(server.allRequests.count == 12)
                #expect(Descriptors.connected(toPort: server.port).count == 12)
                #expect(downloads[12...].allSatisfy { $0.state == .queued })
                // Twelve partial files hold bytes; six stay open, the others were closed after their write.
                #expect(openPartialFiles() == 6)
                // Pausing frees the slots (and the files): the next twelve run.
                for download in downloads[0..<12] { await download.pause() }
                await waitForBytes(downloads[12...])
                #expect(server.allRequests.count == 24)
                for download in downloads[12...] { await download.pause() }
                // Resumed, each asks for the rest and gets it (a second request to a path behaves).
                for download in downloads { await download.resume() }
                for download in downloads { _ = try await download.finished() }
            }
            for (index, path) in paths.enumerated() {
                #expect(
                    try Data(contentsOf: directory.appendingPathComponent("\(index).bin"))
                        == FaultServer.body(size: 6144)
                )
                #expect(server.requests(to: "/\(path)").map(\.range) == [nil, "bytes=2048-"])
            }
            #expect(openPartialFiles() == 0)
        }
    }

    @Test(
        "a storm of pauses, resumes and cancels on 40 downloads, few slots and fewer open files: each ends whole or cancelled",
        // Open-files limits: 20 slots and 10 open partials; 4 slots and 2 open partials. With 1 MiB
        // buffers only 4 may be in use: the other transfers write through, and whole files are
        // written by the loop (more than half of the buffers in use).
        arguments: [(40, 16 * 1024), (8, 16 * 1024), (40, 1024 * 1024)]
    )
    func pauseResumeCancelStorm(openFilesLimit: Int, bufferSize: Int) async throws {
        let seed = UInt64(Date().timeIntervalSince1970)
        var random = SeededGenerator(seed: seed)
        try await withFaultServer { server, directory in
            var configuration = configuration(directory)
            configuration.maxConcurrentDownloads = 8
            configuration.openFilesLimitOverride = openFilesLimit
            configuration.bufferSize = bufferSize
            configuration.stallTimeout = .seconds(30)
            let downloads = try await withDownloadManager(configuration: configuration) { manager in
                let downloads = try (0..<40).map {
                    try manager.download(
                        from: server.url("drip/4096/2/200000?\($0)"),
                        to: directory.appendingPathComponent("\($0).bin")
                    )
                }
                var cancelled = Set<Int>()
                // Not awaited: a storm, the controls racing each other in the loop's turns (the
                // synchronous forms, chosen by their type).
                func ask(_ control: () -> Void) { control() }
                for _ in 0..<3000 {
                    let index = Int.random(in: 0..<40, using: &random)
                    switch Int.random(in: 0..<400, using: &random) {
                    case 0:
                        ask(downloads[index].cancel)
                        cancelled.insert(index)
                    case 1...180: ask(downloads[index].pause)
                    default: ask(downloads[index].resume)
                    }
                    if Int.random(in: 0..<10, using: &random) == 0 { await Task.yield() }
                }
                for download in downloads { await download.resume() }
                for (index, download) in downloads.enumerated() {
                    do {
                        _ = try await download.finished()  // (a cancel after completion changes nothing)
                    } catch let error as DownloadError {
                        #expect(
                            error.code == .cancelled && cancelled.contains(index),
                            "seed \(seed): \(index): \(error)"
                        )
                    }
                }
                return downloads
            }
            for (index, download) in downloads.enumerated() {
                let path = directory.appendingPathComponent("\(index).bin").path
                if case .cancelled = download.state {
                    #expect(!FileManager.default.fileExists(atPath: path), "seed \(seed)")
                } else {
                    #expect(
                        FileManager.default.contents(atPath: path) == FaultServer.body(size: 200_000),
                        "seed \(seed): \(index)"
                    )
                }
            }
            // A cancelled download leaves no partial file; the others were renamed away.
            let left = try FileManager.default.contentsOfDirectory(atPath: configuration.stateDirectory!.path)
            #expect(left.filter { $0.hasSuffix(".part") }.isEmpty, "seed \(seed): \(left)")
        }
    }

    @Test("503 and 429 with Retry-After: the delay asked for is honoured", arguments: [503, 429])
    func retryAfter(status: Int) async throws {
        try await withFaultServer { server, directory in
            let path = "busy/\(status)/2/1/200000"
            let clock = ContinuousClock()
            let start = clock.now
            let (events, result) = try await fetch(
                path,
                from: server,
                into: directory,
                configuration: configuration(directory)
            )
            #expect(throws: Never.self) { try result.get() }
            #expect(clock.now - start >= .seconds(2))
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 200_000))
            #expect(retries(in: events).map(\.1) == [.seconds(1), .seconds(1)])
            #expect(retries(in: events).allSatisfy { $0.0.httpStatus == status })
            #expect(server.requests(to: "/\(path)").map(\.status) == [status, status, 200])
        }
    }
}
