import Foundation
import Synchronization
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulTransfer
@testable import HaulValues

/// Request headers (issue 18, item 1): sent on every attempt, resume and same-origin redirect,
/// dropped on a redirect to another origin, never written to disk or logs, and asked for again
/// when a later process restores a download that needs them.
@Suite("Request headers", .timeLimit(.minutes(2)))
struct HeaderTests {
    static let secrets = [NginxServer.bearer, NginxServer.cookie, NginxServer.apiKey]

    func configuration(_ directory: URL? = nil, log: CapturedLog? = nil) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration()
        configuration.bufferSize = 64 * 1024
        configuration.progressInterval = .milliseconds(20)
        configuration.stateDirectory = directory
        if let log { configuration.logger = log.logger }
        return configuration
    }

    func expectNoSecrets(in data: Data, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for secret in Self.secrets {
            #expect(data.range(of: Data(secret.utf8)) == nil, "\(what) holds \(secret)", sourceLocation: sourceLocation)
        }
    }

    // MARK: pure parts

    @Test("a header is checked: a token name, no line break, none of the headers Haul sets itself")
    func validation() {
        #expect(DownloadHeader("X-Tenant", "acme").problem() == nil)
        #expect(DownloadHeader("X-Empty", "").problem() == nil)
        #expect(DownloadHeader("X-Empty", "").engine.line == "X-Empty;")
        #expect(DownloadHeader("Bad Name", "v").problem()?.contains("header name") == true)
        #expect(DownloadHeader("", "v").problem() != nil)
        for reserved in ["Range", "if-range", "If-None-Match", "Accept-Encoding", "Content-Length"] {
            #expect(
                DownloadHeader(reserved, "x").problem()?.contains("cannot be set by a request") == true,
                "\(reserved)"
            )
        }
        let injected = DownloadHeader("X-Note", "a\r\nAuthorization: Bearer \(NginxServer.bearer)").problem()
        #expect(injected?.contains("line break") == true)
        #expect(injected?.contains(NginxServer.bearer) == false)
    }

    @Test("sensitive values are redacted when a header or a request is printed")
    func redaction() {
        #expect(DownloadHeader.authorization(bearer: "abc").description == "Authorization: <redacted>")
        #expect(DownloadHeader("cookie", "a=b").isSensitive)
        #expect(DownloadHeader("X-Api-Key", "k").isSensitive)
        #expect(DownloadHeader("X-Custom", "s", sensitive: true).description == "X-Custom: <redacted>")
        #expect(DownloadHeader("Accept", "text/plain").description == "Accept: text/plain")
        let request = DownloadRequest(
            url: URL(string: "http://h/f")!,
            destination: URL(fileURLWithPath: "/tmp/f"),
            headers: [.authorization(bearer: NginxServer.bearer)]
        )
        #expect(!"\(request)".contains(NginxServer.bearer))
        #expect(!String(reflecting: request).contains(NginxServer.bearer))
        var dumped = ""
        dump(request, to: &dumped)
        #expect(!dumped.contains(NginxServer.bearer) && dumped.contains("<redacted>"), "\(dumped)")
    }

    @Test("a request's header replaces the manager's of the same name, in any case")
    func merging() {
        typealias Header = HaulValues.DownloadHeader  // merged as the layers below send them
        let defaults = [Header("Authorization", "old"), Header("X-A", "1")]
        let merged = Header.merged(defaults, [Header("authorization", "new")])
        #expect(merged.map(\.value) == ["1", "new"])
        #expect(Header.merged([], defaults) == defaults)
        #expect(Header.merged(defaults, []) == defaults)
    }

    @Test("redirects: headers and credentials follow to the same origin only; limits and schemes")
    func redirectDecisions() {
        let original = URL(string: "https://alice:pw@Example.com/a")!
        #expect(
            Redirect.decide(location: "https://example.com:443/b", original: original, followed: 0, limit: 5)
                == .follow(URL(string: "https://alice:pw@example.com:443/b")!, sameOrigin: true)
        )
        for other in ["http://example.com/b", "https://example.com:8443/b", "https://cdn.example.com/b"] {
            #expect(
                Redirect.decide(location: other, original: original, followed: 0, limit: 5)
                    == .follow(URL(string: other)!, sameOrigin: false),
                "\(other)"
            )
        }
        guard
            case .refuse(let tooMany) = Redirect.decide(
                location: "https://example.com/c",
                original: original,
                followed: 5,
                limit: 5
            )
        else {
            Issue.record("a redirect past the limit must be refused")
            return
        }
        #expect(tooMany.curlCode == 47 && !tooMany.isTransient)
        #expect(tooMany.url == "https://Example.com/a")
        guard
            case .refuse(let file) = Redirect.decide(
                location: "file:///etc/passwd",
                original: original,
                followed: 0,
                limit: 5
            )
        else {
            Issue.record("a redirect to file:// must be refused")
            return
        }
        #expect(file.curlCode == 1 && file.description.contains("does not download"))
        #expect(
            Redirect.decide(location: nil, original: original, followed: 0, limit: 5)
                != .follow(original, sameOrigin: true)
        )
    }

    // MARK: against nginx

    @Test("a bearer token, a cookie (a manager default) and an API key are sent; without them, 401")
    func sent() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("h.bin", size: 300_000)
        let log = CapturedLog()
        var configuration = configuration(log: log)
        configuration.headers = [.cookie("session=\(NginxServer.cookie)"), DownloadHeader("X-Api-Key", "wrong")]
        try await withDownloadManager(configuration: configuration) { manager in
            let bearer = try manager.download(
                DownloadRequest(
                    url: server.url("bearer/h.bin"),
                    destination: directory.appendingPathComponent("bearer.bin"),
                    headers: [.authorization(bearer: NginxServer.bearer)]
                )
            )
            let cookie = try manager.download(
                from: server.url("cookie/h.bin"),
                to: directory.appendingPathComponent("cookie.bin")
            )
            // The request's X-Api-Key replaces the manager's wrong one.
            let key = try manager.download(
                DownloadRequest(
                    url: server.url("apikey/h.bin"),
                    destination: directory.appendingPathComponent("key.bin"),
                    headers: [DownloadHeader("x-api-key", NginxServer.apiKey)]
                )
            )
            let denied = try manager.download(
                from: server.url("bearer/h.bin"),
                to: directory.appendingPathComponent("denied.bin")
            )
            for download in [bearer, cookie, key] { _ = try await download.finished() }
            await #expect {
                try await denied.finished()
            } throws: { error in
                (error as? DownloadError)?.httpStatus == 401
            }
        }
        for name in ["bearer.bin", "cookie.bin", "key.bin"] {
            #expect(try Data(contentsOf: directory.appendingPathComponent(name)) == source, "\(name)")
        }
        expectNoSecrets(in: everyByte(under: directory), "the folder")
        expectNoSecrets(in: Data(log.text.utf8), "the log")
        #expect(log.text.contains("request"))  // the log is captured at all
    }

    @Test("a bad header is refused before anything is queued, and the error does not show its value")
    func refused() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withDownloadManager(configuration: configuration()) { manager in
            for header in [
                DownloadHeader("Range", "bytes=0-"), DownloadHeader("Authorization", "a\nb\(NginxServer.bearer)"),
            ] {
                #expect {
                    try manager.download(
                        DownloadRequest(
                            url: URL(string: "http://127.0.0.1:1/x")!,
                            destination: directory.appendingPathComponent("x"),
                            headers: [header]
                        )
                    )
                } throws: { error in
                    guard let error = error as? DownloadError else { return false }
                    return error.code == .invalidHeader && !error.description.contains(NginxServer.bearer)
                }
            }
        }
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent(".haul").path))
        var bad = configuration()
        bad.headers = [DownloadHeader("If-Range", "\"x\"")]
        #expect {
            try DownloadManager(configuration: bad)
        } throws: { error in
            (error as? DownloadError)?.code == .invalidHeader
                && "\(error)".hasPrefix("The download manager was not started: the header 'If-Range'")
        }
    }

    @Test("a redirect to the same origin keeps the headers; to another origin drops every one")
    func redirects() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("r.bin", size: 200_000)
        let headers: [DownloadHeader] = [
            .authorization(bearer: NginxServer.bearer), .cookie("session=\(NginxServer.cookie)"),
            DownloadHeader("X-Api-Key", NginxServer.apiKey), DownloadHeader("X-Tenant", "acme"),
        ]
        try await withDownloadManager(configuration: configuration()) { manager in
            func fetch(_ path: String, _ name: String) throws -> Download {
                try manager.download(
                    DownloadRequest(
                        url: server.url(path),
                        destination: directory.appendingPathComponent(name),
                        headers: headers
                    )
                )
            }
            // /clean/ refuses any of these headers: the control that it can tell.
            let control = try fetch("clean/r.bin", "control.bin")
            await #expect {
                try await control.finished()
            } throws: { error in
                (error as? DownloadError)?.httpStatus == 403
            }
            let same = try fetch("to-bearer/r.bin", "same.bin")
            let other = try fetch("to-other-origin/r.bin", "other.bin")
            _ = try await same.finished()
            _ = try await other.finished()
            #expect(other.response?.url.host == "localhost")
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("same.bin")) == source)
        #expect(try Data(contentsOf: directory.appendingPathComponent("other.bin")) == source)
        let log = server.accessLog()
        #expect(log.filter { $0.uri == "/clean/r.bin" }.map(\.status) == [403, 200])
        #expect(log.filter { $0.uri == "/bearer/r.bin" }.map(\.status) == [200])
    }

    @Test("a download's response names the URL that answered: where a redirect led, without the URL's password")
    func responseURL() async throws {
        let (server, directory) = try await startServerAndDirectory(
            own: "its URLs are written by hand, with a password, from the port"
        )
        defer { stop(server, directory) }
        let source = try server.makeFile("answered.bin", size: 40_000)
        let direct = try #require(URL(string: "http://user:pw-77x@127.0.0.1:\(server.port)/answered.bin"))
        let redirected = try #require(URL(string: "http://user:pw-77x@127.0.0.1:\(server.port)/redirect/answered.bin"))
        try await withDownloadManager(configuration: configuration()) { manager in
            let first = try manager.download(from: direct, to: directory.appendingPathComponent("direct.bin"))
            let second = try manager.download(from: redirected, to: directory.appendingPathComponent("redirected.bin"))
            _ = try await first.finished()
            _ = try await second.finished()
            let answered = try #require(first.response)
            #expect(answered.url.absoluteString == "http://127.0.0.1:\(server.port)/answered.bin")
            #expect(answered.status == 200 && answered.totalBytes == Int64(source.count))
            let afterRedirect = try #require(second.response)
            #expect(afterRedirect.url.absoluteString == "http://127.0.0.1:\(server.port)/answered.bin")
            #expect(!"\(answered)\(afterRedirect)".contains("pw-77x"))
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("redirected.bin")) == source)
        #expect(server.accessLog().filter { $0.uri == "/redirect/answered.bin" }.map(\.status) == [302])
    }

    @Test("an https download redirected to http on its own host: followed without its headers, and said once")
    func downgradeIsFollowedAndSaid() async throws {
        let server = try await NginxServer.start(tls: true)
        let directory = try makeTemporaryDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("d.bin", size: 200_000)
        var configuration = configuration()
        configuration.certificateAuthorityFile = server.certificate
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(
                DownloadRequest(
                    url: server.httpsURL("to-http/clean/d.bin"),
                    destination: directory.appendingPathComponent("d.bin"),
                    headers: [DownloadHeader("X-Api-Key", NginxServer.apiKey)]
                )
            )
            var events: [DownloadEvent] = []
            for await event in download.events { events.append(event) }
            _ = try await download.finished()
            let warnings = events.filter { if case .warning = $0 { true } else { false } }
            #expect(warnings == [.warning(.insecureRedirect(server.url("clean/d.bin")))], "\(warnings)")
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("d.bin")) == source)
        // /clean/ answers 403 to any of the download's headers: none went over plain HTTP.
        #expect(server.accessLog().filter { $0.uri == "/clean/d.bin" }.map(\.status) == [200])
        #expect(
            DownloadWarning.insecureRedirect(server.url("clean/d.bin")).description.contains("over plain HTTP")
        )
    }

    @Test("headers go with the resume after a pause")
    func resume() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 3 * 1024 * 1024
        let source = try server.makeFile("p.bin", size: size)
        let destination = directory.appendingPathComponent("p.bin")
        try await withDownloadManager(configuration: configuration()) { manager in
            let download = try manager.download(
                DownloadRequest(
                    url: server.url("bearer-gated/p.bin"),
                    destination: destination,
                    headers: [.authorization(bearer: NginxServer.bearer)]
                )
            )
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 256 * 1024 } else { false } }
            await download.pause()
            await events.next { if case .paused = $0 { true } else { false } }
            await download.resume()
            #expect(try await download.finished() == destination)
        }
        #expect(try Data(contentsOf: destination) == source)
        let requests = await server.requests(to: "/bearer-gated/p.bin", atLeast: 2)
        #expect(requests.map(\.status) == [200, 206])
    }

    /// Starts `name` from `/bearer-gated/` with the token into `state` and shuts the manager down
    /// after some bytes: a download a later process restores, whose headers it was not given.
    func interrupted(_ name: String, _ server: NginxServer, state: URL, log: CapturedLog) async throws -> Download {
        let manager = try DownloadManager(configuration: configuration(state, log: log))
        let download = try manager.download(
            DownloadRequest(
                url: server.url("bearer-gated/\(name)"),
                destination: state.deletingLastPathComponent().appendingPathComponent(name),
                headers: [.authorization(bearer: NginxServer.bearer)]
            )
        )
        var events = download.events.makeAsyncIterator()
        await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 256 * 1024 } else { false } }
        await manager.shutdown()
        let journal = everyByte(under: state)
        expectNoSecrets(in: journal, "the state directory")
        #expect(journal.range(of: Data("Authorization".utf8)) != nil)  // the name is recorded
        return download
    }

    @Test("a restored download without a provider fails, says what to do, keeps its bytes; given them, it resumes")
    func restoredWithoutProvider() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("s.bin", size: 3 * 1024 * 1024)
        let state = directory.appendingPathComponent("state")
        let log = CapturedLog()
        let download = try await interrupted("s.bin", server, state: state, log: log)

        try await withDownloadManager(configuration: configuration(state, log: log)) { manager in
            guard let restored = manager.download(id: download.id) else {
                // Restored and failed before this task looked (the whole suite on two cores): the
                // row is finished then, and says why.
                await manager.waitUntilIdle()
                let entry = try DownloadManager.journalEntries(stateDirectory: state).first { $0.id == download.id }
                #expect(entry?.lastError?.contains("'Authorization'") == true, "\(String(describing: entry))")
                #expect(entry?.lastError?.contains("headerProvider") == true, "\(String(describing: entry))")
                return
            }
            await #expect {
                try await restored.finished()
            } throws: { error in
                guard let error = error as? DownloadError else { return false }
                return error.code == .headersUnavailable && error.description.contains("'Authorization'")
                    && error.description.contains("headerProvider")
            }
        }
        // Nothing was sent without the token, and the bytes are kept.
        #expect(server.accessLog().filter { $0.uri == "/bearer-gated/s.bin" }.count == 1)
        let kept = try #require(
            try DownloadManager.journalEntries(stateDirectory: state).first { $0.id == download.id }
        )
        #expect(kept.state == .failed && kept.bytesReceived > 0)

        // Asked for again with its headers, it continues from those bytes.
        try await withDownloadManager(configuration: configuration(state, log: log)) { manager in
            let again = try manager.download(
                DownloadRequest(
                    url: download.url,
                    destination: download.destination,
                    headers: [.authorization(bearer: NginxServer.bearer)]
                )
            )
            _ = try await again.finished()
        }
        #expect(try Data(contentsOf: download.destination) == source)
        let requests = await server.requests(to: "/bearer-gated/s.bin", atLeast: 2)
        #expect(requests.map(\.status) == [200, 206])
        expectNoSecrets(in: everyByte(under: directory), "the folder")
        expectNoSecrets(in: Data(log.text.utf8), "the log")
    }

    @Test("a restored download gets its headers from the provider, asked once with their names")
    func restoredWithProvider() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("v.bin", size: 3 * 1024 * 1024)
        let state = directory.appendingPathComponent("state")
        let log = CapturedLog()
        let download = try await interrupted("v.bin", server, state: state, log: log)

        let asked = Mutex<[DownloadManager.HeadersNeeded]>([])
        var configuration = configuration(state, log: log)
        configuration.headerProvider = { needed in
            asked.withLock { $0.append(needed) }
            return [.authorization(bearer: NginxServer.bearer)]
        }
        try await withDownloadManager(configuration: configuration) { manager in
            let restored = try #require(manager.download(id: download.id))
            #expect(try await restored.finished() == download.destination)
        }
        #expect(try Data(contentsOf: download.destination) == source)
        let calls = asked.withLock { $0 }
        #expect(calls.count == 1)
        #expect(calls.first?.names == ["Authorization"] && calls.first?.id == download.id)
        #expect(calls.first?.url == server.url("bearer-gated/v.bin"))
        let requests = await server.requests(to: "/bearer-gated/v.bin", atLeast: 2)
        #expect(requests.map(\.status) == [200, 206])
        expectNoSecrets(in: everyByte(under: directory), "the folder")
        expectNoSecrets(in: Data(log.text.utf8), "the log")
    }

    @Test("a provider that throws fails the download with its words; nothing is sent")
    func providerThrows() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        try server.makeFile("t.bin", size: 3 * 1024 * 1024)
        let state = directory.appendingPathComponent("state")
        let download = try await interrupted("t.bin", server, state: state, log: CapturedLog())
        struct NoToken: Error, CustomStringConvertible { var description: String { "the vault is sealed" } }
        var configuration = configuration(state)
        configuration.headerProvider = { _ in throw NoToken() }
        try await withDownloadManager(configuration: configuration) { manager in
            guard let restored = manager.download(id: download.id) else {
                // Restored and failed before this task looked (the suite on a busy machine): the
                // row is finished then, and says why.
                await manager.waitUntilIdle()
                let entry = try DownloadManager.journalEntries(stateDirectory: state).first { $0.id == download.id }
                #expect(entry?.lastError?.contains("the vault is sealed") == true, "\(String(describing: entry))")
                return
            }
            await #expect {
                try await restored.finished()
            } throws: { error in
                guard let error = error as? DownloadError else { return false }
                return error.code == .headersUnavailable && error.description.contains("the vault is sealed")
            }
        }
        #expect(server.accessLog().filter { $0.uri == "/bearer-gated/t.bin" }.count == 1)
    }
}
