import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// Downloads of one journal waiting to retry at different times: each is woken at its own time,
/// however many wait and whichever is woken first.
@Suite("Retry wake-ups", .timeLimit(.minutes(1)))
struct RetryWakeTests {
    /// Two downloads turned away with `Retry-After` (0 s and 2 s): the first retries at once and
    /// completes while the second still waits. The wake-up of the second must survive the first's:
    /// `waitUntilIdle()` returns only once it completed too, files and discarded bodies alike.
    @Test("a download retried later than another of its journal is not forgotten", arguments: [false, true])
    func laterRetryIsKept(discarding: Bool) async throws {
        try await withFaultServer { server, directory in
            var configuration = FaultTests().configuration(directory)
            if discarding { configuration.stateDirectory = nil }
            try await withDownloadManager(configuration: configuration) { manager in
                let soon = server.url("busy/503/1/0/1000")
                let later = server.url("busy/503/1/2/2000")
                let downloads =
                    discarding
                    ? [try manager.discard(from: soon), try manager.discard(from: later)]
                    : [
                        try manager.download(from: soon, to: directory.appendingPathComponent("soon.bin")),
                        try manager.download(from: later, to: directory.appendingPathComponent("later.bin")),
                    ]
                await manager.waitUntilIdle()
                for download in downloads {
                    guard case .completed = download.state else {
                        Issue.record("\(download.url): \(download.state) when the manager said it was idle")
                        continue
                    }
                }
                #expect(downloads[1].progress.bytesReceived == 2000)
            }
            #expect(server.requests(to: "/busy/503/1/2/2000").count == 2)
        }
    }
}

extension RetryWakeTests {
    /// A download queued without a handle (``DownloadManager/enqueue(_:)``) gets a new one each time
    /// it runs again if nobody kept the last: its counts go on, so that what its final event shows
    /// (bytes received in this process, attempts, connections) is the whole run's.
    @Test(
        "queued without a handle, retried after drops: the final event's handle counts every attempt",
        arguments: [false, true]
    )
    func countsAcrossRetries(discarding: Bool) async throws {
        try await withFaultServer { server, directory in
            var configuration = FaultTests().configuration(directory)
            if discarding { configuration.stateDirectory = nil }
            // Long enough for every event of an attempt to be read, and its handle let go, before the next.
            configuration.retryDelay = .milliseconds(300)
            configuration.maximumRetryDelay = .milliseconds(300)
            try await withDownloadManager(configuration: configuration) { manager in
                let url = server.url("drop/100000/300000")
                let request =
                    discarding
                    ? DownloadRequest.discarding(url)
                    : DownloadRequest(url: url, destination: directory.appendingPathComponent("out.bin"))
                // Another download beside it, which ends first (as in a list given to haul).
                let other = DownloadRequest.discarding(server.url("file/1000"))
                var events = manager.events.makeAsyncIterator()
                _ = try manager.enqueue([request, other])
                var final: DownloadManagerEvent?
                var retries = 0
                while let event = await events.next() {
                    guard event.id == request.id else { continue }
                    if case .waitingToRetry = event.event { retries += 1 }
                    if event.event.isFinal {
                        final = event
                        break
                    }
                }
                let download = try #require(final?.download)
                guard case .completed = download.state else {
                    Issue.record("\(download.state)")
                    return
                }
                #expect(retries == 2)
                #expect(download.bytesReceivedInThisProcess == 300_000)
                #expect(
                    download.timings.attempts == 3 && download.timings.connectionsOpened == 3,
                    "\(download.timings)"
                )
            }
        }
    }
}
