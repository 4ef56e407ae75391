import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Proxies (issue 18, item 2), against a real forward proxy whose log proves what went through it.
/// The environment variables are tested through `haul` (HaulCLITests), in a process of its own:
/// setting them here would send every other test's requests through this proxy.
@Suite("Proxies", .timeLimit(.minutes(2)))
struct ProxyTests {
    func configuration(_ proxy: URL?, log: CapturedLog? = nil) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration()
        configuration.bufferSize = 64 * 1024
        configuration.progressInterval = .milliseconds(20)
        configuration.proxy = proxy
        // The machine's own proxy variables, if any, must not decide these tests.
        configuration.ignoresProxyEnvironment = true
        if let log { configuration.logger = log.logger }
        return configuration
    }

    @Test("through a proxy that wants credentials: the file arrives whole, the proxy saw it, the password is nowhere")
    func authenticated() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let proxy = try await ForwardProxy.start(authenticated: true)
        defer { proxy.stop() }
        let size = 3 * 1024 * 1024
        let source = try server.makeFile("p.bin", size: size)
        let destination = directory.appendingPathComponent("p.bin")
        let log = CapturedLog()
        try await withDownloadManager(configuration: configuration(proxy.url(credentials: true), log: log)) {
            manager in
            // Paused and resumed: the range request goes through the proxy too.
            let download = try manager.download(from: server.url("gated/p.bin"), to: destination)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 256 * 1024 } else { false } }
            await download.pause()
            await events.next { if case .paused = $0 { true } else { false } }
            await download.resume()
            _ = try await download.finished()
        }
        #expect(try Data(contentsOf: destination) == source)
        let through = proxy.requests().filter { $0.contains(server.url("gated/p.bin").path) }
        #expect(through == Array(repeating: "GET \(server.url("gated/p.bin")) HTTP/1.1", count: 2))
        // Whole, then the rest by a range. (nginx logs a request when it ends: the paused one ends when
        // the proxy lets its upstream connection go, which can be after the range's answer.)
        #expect(server.accessLog().filter { $0.uri == "/gated/p.bin" }.map(\.status).sorted() == [200, 206])
        let secret = Data(ForwardProxy.password.utf8)
        #expect(everyByte(under: directory).range(of: secret) == nil)
        #expect(Data(log.text.utf8).range(of: secret) == nil)
    }

    @Test("wrong proxy credentials fail the download, and the error does not show them")
    func refused() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let proxy = try await ForwardProxy.start(authenticated: true)
        defer { proxy.stop() }
        try server.makeFile("w.bin", size: 1000)
        let wrong = "wr0ng-pr0xy-pw"
        try await withDownloadManager(configuration: configuration(proxy.url(credentials: true, password: wrong))) {
            manager in
            let download = try manager.download(
                from: server.url("w.bin"),
                to: directory.appendingPathComponent("w.bin")
            )
            await #expect {
                try await download.finished()
            } throws: { error in
                // tinyproxy 1.11 answers 401 where RFC 9110 says 407.
                guard let error = error as? DownloadError, let status = error.httpStatus else { return false }
                return [401, 407].contains(status) && !error.description.contains(wrong)
            }
        }
        #expect(proxy.requests().contains { $0.contains("/w.bin") })
        #expect(server.accessLog().filter { $0.uri == "/w.bin" }.isEmpty)
    }

    @Test("an HTTPS download goes through the proxy in a CONNECT tunnel, verified end to end")
    func tunnel() async throws {
        let server = try await NginxServer.start(tls: true)
        let directory = try makeTemporaryDirectory()
        defer { stop(server, directory) }
        let proxy = try await ForwardProxy.start()
        defer { proxy.stop() }
        let source = try server.makeFile("t.bin", size: 500_000)
        var configuration = configuration(proxy.url())
        configuration.certificateAuthorityFile = server.certificate
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(
                from: server.httpsURL("t.bin"),
                to: directory.appendingPathComponent("t.bin")
            )
            _ = try await download.finished()
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("t.bin")) == source)
        #expect(proxy.requests().contains("CONNECT 127.0.0.1:\(server.tlsPort) HTTP/1.1"))
    }

    @Test("hosts in proxyBypass are reached directly")
    func bypass() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let proxy = try await ForwardProxy.start()
        defer { proxy.stop() }
        let source = try server.makeFile("b.bin", size: 100_000)
        var configuration = configuration(proxy.url())
        configuration.proxyBypass = ["127.0.0.1"]
        try await withDownloadManager(configuration: configuration) { manager in
            _ = try await manager.download(from: server.url("b.bin"), to: directory.appendingPathComponent("b.bin"))
                .finished()
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("b.bin")) == source)
        #expect(proxy.requests().isEmpty)
        #expect(server.accessLog().filter { $0.uri == "/b.bin" }.map(\.status) == [200])
    }

    @Test("a proxy URL that is not one is refused when the manager starts, without its password")
    func invalidProxy() {
        for bad in ["ftp://u:s3cr3t@proxy:21", "http://u:s3cr3t@/"] {
            var configuration = DownloadManager.Configuration()
            configuration.proxy = URL(string: bad)
            #expect {
                try DownloadManager(configuration: configuration)
            } throws: { error in
                guard let error = error as? DownloadError else { return false }
                return [.unsupportedScheme, .invalidURL].contains(error.code) && !"\(error)".contains("s3cr3t")
            }
        }
    }
}
