import Foundation
import Logging
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Logging as swift-log's guide asks of a library: a request's failures at debug, dotted and stable
/// metadata keys, and a logger of the caller's own per download (as AsyncHTTPClient takes one per
/// request).
@Suite("logging", .timeLimit(.minutes(1)))
struct LoggingTests {
    @Test("a request's own logger gets its download's messages, with its metadata and Haul's keys, at debug")
    func perDownloadLogger() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let managerLog = CapturedLog()
        let requestLog = CapturedLog()
        var configuration = DownloadManager.Configuration()
        configuration.logger = managerLog.logger
        let missing = server.url("missing.bin")
        let destination = directory.appendingPathComponent("missing.bin")
        try await withDownloadManager(configuration: configuration) { manager in
            var logger = requestLog.logger
            logger[metadataKey: "request.id"] = "r-42"
            var request = DownloadRequest(url: missing, destination: destination)
            request.logger = logger
            await #expect {
                try await manager.fetch(request)
            } throws: { error in
                (error as? DownloadError)?.code == .httpStatus
            }
        }
        let lines = requestLog.text.split(separator: "\n")
        let failed = try #require(lines.first { $0.contains("download failed") }, "\(requestLog.text)")
        #expect(failed.hasPrefix("debug "))
        #expect(failed.contains("request.id=r-42"))
        #expect(failed.contains("haul.download.id=\(DownloadID(destination: destination))"))
        #expect(failed.contains("haul.url=\(missing.absoluteString)"))
        #expect(failed.contains("haul.error="))
        // One request's story stays at debug and below, in its own logger only.
        #expect(lines.allSatisfy { $0.hasPrefix("debug ") || $0.hasPrefix("trace ") }, "\(requestLog.text)")
        #expect(!managerLog.text.contains("missing.bin"), "\(managerLog.text)")
    }

    @Test("a request without a logger logs to the manager's, with the download's id")
    func managerLogger() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("logged.bin", size: 10_000)
        let log = CapturedLog()
        var configuration = DownloadManager.Configuration()
        configuration.logger = log.logger
        let destination = directory.appendingPathComponent("logged.bin")
        try await withDownloadManager(configuration: configuration) { manager in
            let file = try await manager.fetch(server.url("logged.bin"), to: destination)
            #expect(file == destination)
        }
        #expect(try Data(contentsOf: destination) == source)
        let request = try #require(log.text.split(separator: "\n").first { $0.hasPrefix("debug request ") })
        #expect(request.contains("haul.download.id=\(DownloadID(destination: destination))"))
        #expect(request.contains("haul.range.first=0"))
    }
}
