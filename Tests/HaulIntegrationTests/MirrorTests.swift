import Foundation
import Glibc
import Synchronization
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// Mirrors and fresh URLs (issue 18, items 4 and 5): a failure another URL may not have moves the
/// download to its next URL, which continues the bytes on disk only if it proves the same file; one
/// that serves another file is dropped, never spliced. A refresh hook gives fresh URLs for 401, 403
/// and 410.
@Suite("Mirrors and fresh URLs", .timeLimit(.minutes(2)))
struct MirrorTests {
    let faults = FaultTests()

    /// Downloads `request` and returns every event and the outcome.
    func fetch(
        _ request: DownloadRequest,
        configuration: DownloadManager.Configuration
    ) async throws -> (events: [DownloadEvent], result: Result<URL, DownloadError>, download: Download) {
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(request)
            var events: [DownloadEvent] = []
            for await event in download.events { events.append(event) }
            do {
                return (events, .success(try await download.finished()), download)
            } catch let error as DownloadError {
                return (events, .failure(error), download)
            }
        }
    }

    /// Downloads `/expire/CUT/SIZE` (a link that breaks after `cut` bytes, then answers 403) with
    /// `mirrors`, into a new directory's `out`: every event, the outcome, the handle, the directory.
    func fetchBreakingLink(
        after cut: Int,
        size: Int,
        mirrors: (FaultServer) -> [URL],
        from server: FaultServer
    ) async throws -> (events: [DownloadEvent], result: Result<URL, DownloadError>, download: Download, directory: URL)
    {
        let directory = try makeTemporaryDirectory()
        var request = DownloadRequest(
            url: server.url("expire/\(cut)/\(size)"),
            destination: directory.appendingPathComponent("out")
        )
        request.mirrors = mirrors(server)
        let (events, result, download) = try await fetch(request, configuration: faults.patient(directory))
        return (events, result, download, directory)
    }

    func switches(in events: [DownloadEvent]) -> [(URL, DownloadError)] {
        events.compactMap { if case .switchedURL(let url, let error) = $0 { (url, error) } else { nil } }
    }

    func dropped(in events: [DownloadEvent]) -> [URL] {
        events.compactMap { if case .warning(.urlDropped(let url, _)) = $0 { url } else { nil } }
    }

    @Test("a refused connection and a 404 move on to the next mirror at once; the file comes from the one that works")
    func failover() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("m.bin", size: 300_000)
        var request = DownloadRequest(
            url: URL(string: "http://127.0.0.1:1/m.bin")!,  // nothing listens on port 1
            destination: directory.appendingPathComponent("m.bin")
        )
        request.mirrors = [server.url("missing/m.bin"), server.url("m.bin")]
        let (events, result, download) = try await fetch(request, configuration: faults.patient(directory))
        #expect(try result.get() == directory.appendingPathComponent("m.bin"))
        #expect(try Data(contentsOf: directory.appendingPathComponent("m.bin")) == source)
        let moves = switches(in: events)
        #expect(moves.map(\.0) == [server.url("missing/m.bin"), server.url("m.bin")])
        #expect(moves.first?.1.curlCode == 7)
        #expect(moves.last?.1.httpStatus == 404)
        #expect(download.url == server.url("m.bin"))
        // Moving on is not a retry: no backoff was waited.
        #expect(faults.retries(in: events).isEmpty)
    }

    @Test("a link that breaks after 600 KB continues at a mirror of the same file from the bytes on disk")
    func resumesAtMirror() async throws {
        let server = FaultServer.shared()
        defer { server.stop() }
        let size = 2_000_000
        let (events, result, _, directory) = try await fetchBreakingLink(
            after: 600000,
            size: size,
            mirrors: { server in [server.url("file/\(size)")] },
            from: server
        )
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try result.get()
        #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: size))
        #expect(switches(in: events).map(\.0) == [server.url("file/\(size)")])
        #expect(faults.restarts(in: events).isEmpty)
        // The mirror was asked for the 64 KiB before the partial's end again (they matched), and the rest.
        let mirror = server.requests(to: "/file/\(size)")
        #expect(mirror.count == 1)
        #expect(mirror.first?.status == 206)
        #expect(mirror.first?.range == "bytes=\(600_000 - 65_536)-")
        #expect(mirror.first?.ifRange == "\"v1-\(size)\"")
    }

    @Test(
        "a mirror that ignores Range (Accept-Ranges, the same ETag): asked once more without If-Range, then its whole answer is read past the bytes held, the overlap compared: a file continues, so does a FIFO"
    )
    func mirrorIgnoringRange() async throws {
        let server = FaultServer.shared()
        defer { server.stop() }
        let size = 1_000_000
        // It asked the mirror again with the same If-Range forever, without a pause (1,262 requests in 5 s).
        let (events, result, _, directory) = try await fetchBreakingLink(
            after: 300_000,
            size: size,
            mirrors: { server in [server.url("norange/\(size)")] },
            from: server
        )
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try result.get()
        #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: size))
        #expect(faults.restarts(in: events).isEmpty && dropped(in: events).isEmpty)
        let asked = server.requests(to: "/norange/\(size)")
        #expect(asked.map(\.ifRange) == ["\"v1-\(size)\"", nil], "\(asked.map(\.range))")
        // A FIFO, which cannot start over, the same way.
        let fifo = directory.appendingPathComponent("pipe").path
        #expect(mkfifo(fifo, 0o644) == 0)
        let reader = StreamReader.fifo(fifo)
        var request = DownloadRequest(url: server.url("expire/250000/\(size)"), destination: URL(fileURLWithPath: fifo))
        request.mirrors = [server.url("norange/\(size)")]
        let (_, streamed, _) = try await fetch(request, configuration: faults.patient(directory))
        _ = try streamed.get()
        #expect(await reader.everything() == FaultServer.body(size: size))
        #expect(server.requests(to: "/norange/\(size)").count == 4)
    }

    @Test("a mirror that serves other bytes of the same length, without a validator, is dropped, never spliced")
    func impostorDropped() async throws {
        let server = FaultServer.shared()
        defer { server.stop() }
        let size = 2_000_000
        let (events, result, download, directory) = try await fetchBreakingLink(
            after: 600000,
            size: size,
            mirrors: { server in [server.url("impostor/\(size)"), server.url("file/\(size)")] },
            from: server
        )
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try result.get()
        #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: size))
        #expect(dropped(in: events) == [server.url("impostor/\(size)")])
        #expect(switches(in: events).map(\.0) == [server.url("impostor/\(size)"), server.url("file/\(size)")])
        #expect(faults.restarts(in: events).isEmpty)
        #expect(download.url == server.url("file/\(size)"))
        // The impostor answered the range (it ignores If-Range); its bytes differed from the partial's.
        #expect(server.requests(to: "/impostor/\(size)").map(\.status) == [206])
        #expect(server.requests(to: "/file/\(size)").first?.range == "bytes=\(600_000 - 65_536)-")
    }

    @Test("when every mirror is dropped, the download goes on as the first failure says: here, 403 fails it")
    func everyMirrorDropped() async throws {
        let server = FaultServer.shared()
        defer { server.stop() }
        let size = 1_000_000
        let (events, result, _, directory) = try await fetchBreakingLink(
            after: 300000,
            size: size,
            mirrors: { server in [server.url("impostor/\(size)")] },
            from: server
        )
        defer { try? FileManager.default.removeItem(at: directory) }
        guard case .failure(let error) = result else {
            Issue.record("the download must fail")
            return
        }
        #expect(error.httpStatus == 403)
        // Dropped by each attempt: the first (the link broke, a transient failure retried after a
        // delay from the link itself) and the second (the link expired: 403, which fails it).
        #expect(dropped(in: events) == Array(repeating: server.url("impostor/\(size)"), count: 2))
        #expect(faults.retries(in: events).count == 1)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("out").path))
        // The bytes of the real file are kept for a later resume.
        let entry = try #require(
            try DownloadManager.journalEntries(stateDirectory: directory.appendingPathComponent("state")).first
        )
        #expect(entry.bytesReceived == 300_000)
    }

    @Test("an expired link gets a fresh URL from the hook and continues from the bytes on disk")
    func refreshed() async throws {
        let (server, directory) = try startFaultServerAndDirectory()
        defer { stop(server, directory) }
        let size = 2_000_000
        let asked = Mutex<[DownloadManager.ExpiredURL]>([])
        var configuration = faults.patient(directory)
        let fresh = server.url("file/\(size)?sig=fresh")
        configuration.urlRefresher = { expired in
            asked.withLock { $0.append(expired) }
            return DownloadManager.FreshURL(fresh)
        }
        let request = DownloadRequest(
            url: server.url("expire/600000/\(size)?sig=old"),
            destination: directory.appendingPathComponent("out")
        )
        let (events, result, download) = try await fetch(request, configuration: configuration)
        _ = try result.get()
        #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: size))
        let calls = asked.withLock { $0 }
        #expect(calls.map(\.status) == [403])
        #expect(calls.first?.url == server.url("expire/600000/\(size)?sig=old"))
        #expect(switches(in: events).map(\.0) == [fresh])
        #expect(download.url == fresh)
        let continued = server.requests(to: "/file/\(size)?sig=fresh")
        #expect(continued.map(\.status) == [206])
        #expect(continued.first?.range == "bytes=\(600_000 - 65_536)-")
    }

    @Test(
        "a fresh URL's headers from the hook are kept for the download's later attempts here: asked once, each retry on the fresh URL"
    )
    func refreshedKeptForRetries() async throws {
        let (server, directory) = try startFaultServerAndDirectory()
        defer { stop(server, directory) }
        let size = 400_000
        let asked = Mutex(0)
        // Retries at once, and with no budget spent: each attempt makes progress.
        var configuration = faults.configuration(directory, retryLimit: 2)
        configuration.stallTimeout = .seconds(10)
        // The fresh link cuts every 50 KB. Its header is a value no row holds (rows keep names only):
        // an attempt without it would not be sent.
        let fresh = server.url("drop/50000/\(size)?sig=fresh")
        configuration.urlRefresher = { _ in
            asked.withLock { $0 += 1 }
            return DownloadManager.FreshURL(fresh, headers: [DownloadHeader("X-Signature", "fresh-s1gnature")])
        }
        let request = DownloadRequest(
            url: server.url("expire/100000/\(size)?sig=old"),
            destination: directory.appendingPathComponent("out")
        )
        let (_, result, download) = try await fetch(request, configuration: configuration)
        #expect(try result.get() == directory.appendingPathComponent("out"))
        #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: size))
        #expect(download.url == fresh)
        #expect(asked.withLock { $0 } == 1)
        // The old link: its first answer (cut at 100 KB) and its 403. Then the fresh one only, each
        // attempt from where the bytes end.
        #expect(server.requests(to: "/expire/100000/\(size)?sig=old").map(\.status) == [200, 403])
        let continued = server.requests(to: "/drop/50000/\(size)?sig=fresh")
        #expect(continued.count >= 6 && continued.allSatisfy { $0.status == 206 }, "\(continued.map(\.status))")
        // The value was kept in memory only: nothing under the folder (the journal) holds it.
        #expect(everyByte(under: directory).range(of: Data("fresh-s1gnature".utf8)) == nil)
    }

    @Test("without a hook, or when the hook has no URL, an expired link fails with its 403 as before")
    func notRefreshed() async throws {
        let server = FaultServer.shared()
        defer { server.stop() }
        for hook in [false, true] {
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let called = Mutex(0)
            var configuration = faults.patient(directory)
            if hook {
                configuration.urlRefresher = { _ in
                    called.withLock { $0 += 1 }
                    return nil
                }
            }
            let path = "expire/300000/1000000?hook=\(hook)"
            let request = DownloadRequest(url: server.url(path), destination: directory.appendingPathComponent("out"))
            let (events, result, _) = try await fetch(request, configuration: configuration)
            guard case .failure(let error) = result else {
                Issue.record("the download must fail")
                continue
            }
            #expect(error.httpStatus == 403)
            #expect(switches(in: events).isEmpty)
            #expect(called.withLock { $0 } == (hook ? 1 : 0))
        }
    }
}
