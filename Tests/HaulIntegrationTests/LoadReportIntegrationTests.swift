import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// A report fed by real downloads against nginx (issue 60, item 1): the timings carry each
/// download's status and libcurl's phases, and the report adds them up as a harness would.
@Suite("Load report against nginx", .timeLimit(.minutes(1)))
struct LoadReportIntegrationTests {
    @Test(
        "20 bodies over http and 10 over https, 2 missing: statuses, phases (TLS over https only), connections, bytes"
    )
    func reportsRealDownloads() async throws {
        let server = try await NginxServer.start(tls: true)
        let directory = try makeTemporaryDirectory()
        defer { stop(server, directory) }
        let size = 64 * 1024
        _ = try server.makeFile("load.bin", size: size, seed: 60)
        var configuration = DownloadManager.Configuration.forTests()
        configuration.certificateAuthorityFile = server.certificate
        configuration.maxConcurrentDownloads = 4
        var plain = LoadReport()
        var secure = LoadReport()
        try await withDownloadManager(configuration: configuration) { manager in
            let urls =
                (0..<20).map { _ in server.url("load.bin") } + [server.url("missing.bin"), server.url("gone.bin")]
            let downloads = try urls.map { try manager.discard(from: $0) }
            let tls = try (0..<10).map { _ in try manager.discard(from: server.httpsURL("load.bin")) }
            for (report, list) in [(0, downloads), (1, tls)] {
                for download in list {
                    let outcome: LoadReport.Outcome
                    do {
                        _ = try await download.finished()
                        outcome = .completed
                    } catch let error as DownloadError {
                        outcome = .failed(error)
                    }
                    if report == 0 {
                        plain.record(download.timings, outcome: outcome)
                    } else {
                        secure.record(download.timings, outcome: outcome)
                    }
                }
            }
        }
        #expect(plain.requests == 22 && plain.completed == 20 && plain.failed == 2)
        #expect(plain.statusCodes == [200: 20, 404: 2])
        #expect(plain.errors == [.httpStatus: 2])
        #expect(plain.bytes == Int64(20 * size))
        // Every request was answered: each went over a connection opened for it or one kept open.
        #expect(plain.connectionsOpened >= 1 && plain.connectionsOpened + plain.connectionsReused == 22)
        // First byte of every answered download; name lookup and connect of those that opened a
        // connection (one request each here: one connection at most each); over http no TLS.
        #expect(plain.firstByte.count == 22 && plain.tls.count == 0)
        #expect(plain.nameLookup.count == plain.connectionsOpened && plain.connect.count == plain.connectionsOpened)
        #expect(plain.connect.max <= plain.firstByte.max)
        #expect(plain.timeToFirstByte.count == 20 && plain.total.count == 20)
        #expect(plain.timeToFirstByte.value(atPercentile: 50) <= plain.total.value(atPercentile: 50))
        #expect(plain.requestsPerSecond > 0 && plain.timeline.reduce(0) { $0 + $1.completed } == 20)
        #expect(secure.completed == 10 && secure.statusCodes == [200: 10])
        // Over https, the handshake of each connection opened is measured (a reused one has none).
        #expect(secure.tls.count == secure.connectionsOpened && secure.connectionsOpened >= 1)
        #expect(secure.tls.max <= secure.firstByte.max)
    }
}
