import Foundation
import InMemoryTracing
import Testing
import Tracing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// A span per attempt, into an `InMemoryTracer` of the test's own
/// (``DownloadManager/Configuration/tracer``): nothing process-wide is bootstrapped.
@Suite("tracing", .timeLimit(.minutes(1)))
struct TracingTests {
    func configuration(_ tracer: InMemoryTracer) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration.forTests()
        configuration.tracer = tracer
        configuration.retryDelay = .milliseconds(10)
        return configuration
    }

    /// The finished spans of downloads' attempts.
    func attempts(_ tracer: InMemoryTracer) -> [FinishedInMemorySpan] {
        tracer.finishedSpans.filter { $0.operationName == "GET" }
    }

    @Test("an attempt is a client span with OpenTelemetry's HTTP attributes, a child of the caller's context")
    func spanPerAttempt() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("traced.bin", size: 100_000)
        let tracer = InMemoryTracer()
        let destination = directory.appendingPathComponent("traced.bin")
        // A user name and password in the URL never reach a span.
        var components = URLComponents(url: server.url("traced.bin"), resolvingAgainstBaseURL: false)!
        (components.user, components.password) = ("user", "s3cr3t-pass")
        let url = try #require(components.url)
        let caller = tracer.startSpan("caller")
        try await withDownloadManager(configuration: configuration(tracer)) { manager in
            let file = try await ServiceContext.withValue(caller.context) {
                try await manager.fetch(url, to: destination)
            }
            #expect(file == destination)
        }
        caller.end()
        #expect(try Data(contentsOf: destination) == source)
        let spans = attempts(tracer)
        try #require(spans.count == 1)
        let span = spans[0]
        #expect(span.kind == .client)
        #expect(span.traceID == caller.traceID && span.parentSpanID == caller.spanID)
        #expect(span.attributes.get("http.request.method") == .string("GET"))
        #expect(span.attributes.get("url.full") == .string(server.url("traced.bin").absoluteString))
        #expect(span.attributes.get("server.address") == .string("127.0.0.1"))
        #expect(span.attributes.get("http.response.status_code") == .int64(200))
        #expect(span.attributes.get("http.response.body.size") == .int64(100_000))
        #expect(span.attributes.get("http.request.resend_count") == nil)
        #expect(span.status == nil && span.errors.isEmpty)
        #expect(!"\(span.attributes)".contains("s3cr3t-pass"))
    }

    @Test("a failed attempt's span is marked failed; each retry is a span of its own that counts the resend")
    func failedAttempts() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let tracer = InMemoryTracer()
        var configuration = configuration(tracer)
        configuration.retryLimit = 1
        try await withDownloadManager(configuration: configuration) { manager in
            await #expect(throws: DownloadError.self) {
                try await manager.fetch(server.url("missing.bin"), to: directory.appendingPathComponent("missing.bin"))
            }
            // Port 1 on loopback: refused at once, retried once.
            await #expect(throws: DownloadError.self) {
                try await manager.fetch(URL(string: "http://127.0.0.1:1/f")!, to: directory.appendingPathComponent("f"))
            }
        }
        let spans = attempts(tracer)
        let missing = spans.filter {
            $0.attributes.get("url.full") == .string(server.url("missing.bin").absoluteString)
        }
        try #require(missing.count == 1)
        #expect(missing[0].attributes.get("http.response.status_code") == .int64(404))
        #expect(missing[0].status?.code == .error)
        let refused = spans.filter { $0.attributes.get("url.full") == .string("http://127.0.0.1:1/f") }
        try #require(refused.count == 2)
        #expect(refused.allSatisfy { $0.status?.code == .error && $0.errors.count == 1 })
        #expect(refused[0].attributes.get("http.request.resend_count") == nil)
        #expect(refused[1].attributes.get("http.request.resend_count") == .int64(1))
        // Each attempt is its own trace root: no caller's context was given.
        #expect(refused.allSatisfy { $0.parentSpanID == nil })
    }

    @Test("a resumed download's attempt says where its range starts, and answers 206")
    func resumedAttempt() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("resumed.bin", size: 3 * 1024 * 1024)
        let destination = directory.appendingPathComponent("resumed.bin")
        let tracer = InMemoryTracer()
        var pausedAt: Int64 = 0
        try await withDownloadManager(configuration: configuration(tracer)) { manager in
            // 1 MiB at once, then slowly; a range at full speed.
            let download = try manager.download(from: server.url("gated/resumed.bin"), to: destination)
            let paused = try #require(try await download.pauseOnceAndFinish(after: 256 * 1024))
            pausedAt = paused.pausedAt
            #expect(paused.file == destination)
        }
        #expect(try Data(contentsOf: destination) == source)
        let spans = attempts(tracer)
        try #require(spans.count == 2)
        #expect(spans[0].attributes.get("haul.range.first") == nil)
        #expect(spans[0].attributes.get("http.response.status_code") == .int64(200))
        #expect(spans[1].attributes.get("haul.range.first") == .int64(pausedAt))
        #expect(spans[1].attributes.get("http.response.status_code") == .int64(206))
        #expect(spans[1].attributes.get("http.response.body.size") == .int64(Int64(source.count) - pausedAt))
    }
}
