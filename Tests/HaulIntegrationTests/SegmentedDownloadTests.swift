import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// Several connections per file (issue 19, items 1–3 and 5), against nginx: `/perconn/` sends each
/// connection at most 1 MiB/s, `/uneven/` sends a request without a range at 8 MiB/s and a ranged one
/// at 1 MiB/s (so the first connection finishes its segment early and must split another), and
/// `/norange/` ignores ranges. Speed itself is measured by benchmark (f); these tests check what load
/// cannot break: the bytes, the requests nginx saw, and a bound that one connection cannot meet.
@Suite("Segmented downloads", .timeLimit(.minutes(3)))
struct SegmentedDownloadTests {
    func configuration(connections: Int, minimumSegment: Int64 = 256 * 1024) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration()
        configuration.bufferSize = 64 * 1024
        configuration.connectionsPerFile = connections
        configuration.minimumSegmentSize = minimumSegment
        configuration.progressInterval = .milliseconds(20)
        return configuration
    }

    /// The first byte of each range nginx was asked for (`bytes=a-b` or `bytes=a-`); 0 for none.
    static func rangeStart(_ range: String) -> Int64? {
        guard range != "-" else { return 0 }
        guard range.hasPrefix("bytes=") else { return nil }
        return Int64(range.dropFirst(6).prefix { $0 != "-" })
    }

    @Test(
        "4 connections over a per-connection limit: byte-identical, four ranged requests in flight at once on four connections, each range asked once"
    )
    func fourConnections() async throws {
        let (server, directory) = try await startServerAndDirectory(own: "the kernel's sockets to its port are counted")
        defer { stop(server, directory) }
        let size = 4 * 1024 * 1024
        let source = try server.makeFile("four.bin", size: size, seed: 4)
        let split = directory.appendingPathComponent("split.bin")
        var connectionsSeen = 0
        let sampler = TCPTable.Sampler(port: server.port)
        try await withDownloadManager(configuration: configuration(connections: 4)) { manager in
            // The manager's feed, not the download's own events: a download's subscriber keeps
            // 16 events and coalesces progress, so a test slowed by a loaded machine may see only
            // the last one (when the connections have ended); the feed keeps 4,096.
            var events = manager.events.makeAsyncIterator()
            let download = try manager.download(from: server.url("perconn/four.bin"), to: split)
            while let event = await events.next(), !event.event.isFinal {
                if case .progress(let progress) = event.event {
                    connectionsSeen = max(connectionsSeen, progress.connections)
                    #expect(progress.bytesReceived <= Int64(size))
                }
            }
            _ = try await download.finished()
        }
        let kernel = sampler.stop()
        #expect(try Data(contentsOf: split) == source)
        #expect(connectionsSeen == 4, "progress reported at most \(connectionsSeen) connections")
        // What makes it faster, as facts rather than times (speed is benchmark (f)'s): nginx sends
        // each connection 1 MiB/s, and four connections to it were open at once (the kernel's
        // count: nginx's log ends a request the client cut late, so its overlaps can count five),
        // each for a range of its own.
        #expect(kernel.most == 4, "the kernel saw \(kernel.most) connections to nginx at once in \(kernel.looks) looks")
        let requests = server.accessLog().filter { $0.uri == "/perconn/four.bin" }
        #expect(Set(requests.map(\.connection)).count >= 4)
        #expect(requests.filter { $0.range.hasPrefix("bytes=") }.count >= 3, "\(requests.map(\.range))")
        #expect(requests.reduce(0) { $0 + $1.bytesSent } >= Int64(size))
        // Every byte came once: the requests' ranges do not overlap beyond what a cut connection sent.
        #expect(requests.reduce(0) { $0 + $1.bytesSent } < Int64(size) + 4 * 256 * 1024)
        #expect(requests.filter { $0.range.hasPrefix("bytes=") }.allSatisfy { $0.status == 206 && $0.ifRange != "-" })
    }

    /// Downloads `url` to `destination` and returns its events as the manager's feed has them (the
    /// feed keeps 4,096; a download's own subscriber, 16, may drop a warning on a loaded machine).
    static func download(
        _ url: URL,
        to destination: URL,
        _ configuration: DownloadManager.Configuration
    ) async throws -> [DownloadEvent] {
        try await withDownloadManager(configuration: configuration) { manager in
            var feed = manager.events.makeAsyncIterator()
            let download = try manager.download(from: url, to: destination)
            var events: [DownloadEvent] = []
            while let event = await feed.next() {
                events.append(event.event)
                if event.event.isFinal { break }
            }
            _ = try await download.finished()
            return events
        }
    }

    /// Makes a file `name` of `size` bytes, fetches it from `location` over up to `connections`,
    /// checks it byte for byte, and returns nginx's log of its requests.
    func fetch(
        _ name: String,
        size: Int,
        from location: String,
        connections: Int,
        server: NginxServer,
        into directory: URL
    ) async throws -> [NginxServer.LogEntry] {
        let source = try server.makeFile(name, size: size, seed: UInt64(size % 997))
        let destination = directory.appendingPathComponent(name)
        try await withDownloadManager(configuration: configuration(connections: connections)) { manager in
            _ = try await manager.download(from: server.url("\(location)/\(name)"), to: destination).finished()
        }
        #expect(try Data(contentsOf: destination) == source)
        return server.accessLog().filter { $0.uri == "/\(location)/\(name)" }
    }

    @Test(
        "past two connections nginx sends an error page as 200: those connections fail, the others finish; nothing restarts"
    )
    func errorPageAsTwoHundred() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 4 * 1024 * 1024
        let source = try server.makeFile("busy.bin", size: size, seed: 38)
        let destination = directory.appendingPathComponent("busy.bin")
        var configuration = configuration(connections: 4)
        configuration.retryDelay = .milliseconds(10)
        let events = try await Self.download(server.url("busy-page/busy.bin"), to: destination, configuration)
        // Before: "the remote file changed; started over", and the 79-byte page became the file.
        #expect(try Data(contentsOf: destination) == source)
        #expect(!events.contains { if case .restarted = $0 { true } else { false } })
        let pages = server.accessLog().filter {
            $0.uri == "/busy-page/busy.bin" && $0.status == 200 && $0.range != "-"
        }
        #expect(!pages.isEmpty, "nginx never sent its page: nothing was tested")
        #expect(pages.allSatisfy { $0.bytesSent == Int64(NginxServer.busyPage.utf8.count) })
    }

    @Test(
        "HAProxy round-robin over two nginx with different versions, 4 connections: one version, whole; the warning says why"
    )
    func twoVersionsBehindHAProxy() async throws {
        let (first, directory) = try await startServerAndDirectory(own: "HAProxy asks both servers for the same path")
        let second = try await NginxServer.start()
        defer {
            stop(second)
            stop(first, directory)
        }
        let size = 4 * 1024 * 1024
        let versions = [
            try first.makeFile("v.bin", size: size, seed: 51), try second.makeFile("v.bin", size: size, seed: 52),
        ]
        // Different modification times: nginx's ETags (mtime-size) differ, as two deploys' do.
        for (server, age) in [(first, 3600.0), (second, 7200.0)] {
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSinceNow: -age)],
                ofItemAtPath: server.root.appendingPathComponent("v.bin").path
            )
        }
        let balancer = try await HAProxy.start(backends: [first.port, second.port], probe: "/")
        defer { balancer.stop() }
        let destination = directory.appendingPathComponent("v.bin")
        let events = try await Self.download(
            balancer.url("perconn/v.bin"),
            to: destination,
            configuration(connections: 4)
        )
        // Before: "even after restarting from zero; nothing was spliced", a failure.
        let file = try Data(contentsOf: destination)
        #expect(file == versions[0] || file == versions[1])
        #expect(events.contains(.warning(.versionsDiffer)))
        let answered =
            first.accessLog().filter { $0.uri == "/perconn/v.bin" }.count
            + second.accessLog().filter { $0.uri == "/perconn/v.bin" }.count
        #expect(answered >= 4, "both backends answered \(answered) requests")
    }

    @Test("a connection that finishes its segment takes half of the largest one left (aria2's dynamic split)")
    func dynamicSplit() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 4 * 1024 * 1024
        let requests = try await fetch(
            "uneven.bin",
            size: size,
            from: "uneven",
            connections: 2,
            server: server,
            into: directory
        )
        // The plan: the first request from 0, the second segment from the middle. The first finishes
        // its half at 8 MiB/s while the second crawls at 1 MiB/s, and takes half of what is left.
        let planned: Set<Int64> = [0, Int64(size / 2)]
        let starts = requests.compactMap { Self.rangeStart($0.range) }
        #expect(starts.contains { !planned.contains($0) }, "no split was asked for: \(requests.map(\.range))")
        #expect(requests.count >= 3)
    }

    @Test("over HTTPS the segments get TCP connections of their own (HTTP/1.1): a per-connection limit is not shared")
    func httpsSegmentsOwnConnections() async throws {
        let server = try await NginxServer.start(tls: true)
        let directory = try makeTemporaryDirectory()
        defer { stop(server, directory) }
        let size = 4 * 1024 * 1024
        let source = try server.makeFile("tls.bin", size: size, seed: 16)
        var configuration = configuration(connections: 4)
        configuration.certificateAuthorityFile = server.certificate
        let destination = directory.appendingPathComponent("tls.bin")
        try await withDownloadManager(configuration: configuration) { manager in
            _ = try await manager.download(from: server.httpsURL("perconn/tls.bin"), to: destination).finished()
        }
        #expect(try Data(contentsOf: destination) == source)
        // A segment's request ended early (its range split off to a freed connection) is logged
        // only once nginx notices the closed connection, which can be after the download ended.
        let requests = await server.requests(to: "/perconn/tls.bin", atLeast: 4)
        let ranged = requests.filter { $0.range.hasPrefix("bytes=") }
        #expect(ranged.count >= 3)
        #expect(ranged.allSatisfy { $0.protocolName == "HTTP/1.1" }, "\(ranged.map(\.protocolName))")
        #expect(Set(requests.map(\.connection)).count >= 4, "\(requests.map(\.connection))")
    }

    @Test("behind a redirect, and resumed behind it: the segments go where the redirect led")
    func behindARedirect() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 8 * 1024 * 1024
        let source = try server.makeFile("moved.bin", size: size, seed: 17)
        let destination = directory.appendingPathComponent("moved.bin")
        var first = configuration(connections: 4)
        first.stateDirectory = Self.stateDirectory(beside: destination)
        let manager = try DownloadManager(configuration: first)
        // nginx's /to-crawl/ redirects to /crawl/: slow until X-Speed: fast.
        let download = try manager.download(from: server.url("to-crawl/moved.bin"), to: destination)
        var events = download.events.makeAsyncIterator()
        await events.next {
            if case .progress(let p) = $0 { p.connections >= 2 && p.bytesReceived >= 512 * 1024 } else { false }
        }
        await download.pause()
        await events.next { if case .paused = $0 { true } else { false } }
        await manager.shutdown()
        try await withDownloadManager(configuration: fast(configuration(connections: 4), beside: destination)) {
            manager in
            let restored = try #require(manager.download(id: download.id))
            await restored.resume()
            _ = try await restored.finished()
        }
        #expect(try Data(contentsOf: destination) == source)
        let log = server.accessLog()
        // Every segment request went to the redirect's target; only the first requests of each
        // attempt asked the redirecting URL.
        #expect(log.filter { $0.uri == "/to-crawl/moved.bin" }.count == 2)
        #expect(log.filter { $0.uri == "/crawl/moved.bin" && $0.range.hasPrefix("bytes=") }.count >= 4)
        #expect(log.filter { $0.uri == "/crawl/moved.bin" }.allSatisfy { $0.status == 200 || $0.status == 206 })
    }

    @Test(
        "a server that refuses more than two connections per client: the refused ones stop, the others finish the file"
    )
    func serverRefusesExtraConnections() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 3 * 1024 * 1024
        let source = try server.makeFile("two.bin", size: size, seed: 18)
        let destination = directory.appendingPathComponent("two.bin")
        var events: [DownloadEvent] = []
        try await withDownloadManager(configuration: configuration(connections: 4)) { manager in
            let download = try manager.download(from: server.url("twoconn/two.bin"), to: destination)
            for await event in download.events { events.append(event) }
            _ = try await download.finished()
        }
        #expect(try Data(contentsOf: destination) == source)
        let requests = server.accessLog().filter { $0.uri == "/twoconn/two.bin" }
        #expect(requests.contains { $0.status == 503 }, "nginx refused nothing: \(requests.map(\.status))")
        // Not retried as a whole: the refusals cost no delay and no event.
        #expect(!events.contains { if case .waitingToRetry = $0 { true } else { false } })
        #expect(!events.contains { if case .restarted = $0 { true } else { false } })
    }

    @Test("without an ETag, an old Last-Modified pins the segments; a recent one is weak: one connection")
    func lastModifiedOnly() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 3 * 1024 * 1024
        let old = try server.makeFile("old.bin", size: size, seed: 19)
        let recent = try server.makeFile("recent.bin", size: size, seed: 20)
        // An hour old: strong (RFC 9110 §8.8.2.2); the other was written a moment ago.
        let hourAgo = Date().addingTimeInterval(-3600)
        try FileManager.default.setAttributes(
            [.modificationDate: hourAgo],
            ofItemAtPath: server.root.appendingPathComponent("old.bin").path
        )
        try await withDownloadManager(configuration: configuration(connections: 4)) { manager in
            _ = try await manager.download(
                from: server.url("noetag/old.bin"),
                to: directory.appendingPathComponent("o")
            )
            .finished()
            _ = try await manager.download(
                from: server.url("noetag/recent.bin"),
                to: directory.appendingPathComponent("r")
            ).finished()
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("o")) == old)
        #expect(try Data(contentsOf: directory.appendingPathComponent("r")) == recent)
        let log = server.accessLog()
        let ranged = log.filter { $0.uri == "/noetag/old.bin" && $0.range.hasPrefix("bytes=") }
        #expect(ranged.count >= 3)
        #expect(ranged.allSatisfy { $0.status == 206 && $0.ifRange.hasSuffix("GMT") }, "\(ranged.map(\.ifRange))")
        #expect(log.filter { $0.uri == "/noetag/recent.bin" }.count == 1)
    }

    @Test("a checksum is checked over the whole file; a wrong one fails and places nothing")
    func checksumOverSegments() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 3 * 1024 * 1024
        let source = try server.makeFile("sum.bin", size: size, seed: 23)
        let input = directory.appendingPathComponent("sum-input")
        let output = directory.appendingPathComponent("sum-output")
        try source.write(to: input)
        let tool = try ChildProcess("/usr/bin/sha256sum", [input.path], stdout: output.path)
        #expect(await tool.exited() == 0)
        let digest = String(try String(contentsOf: output, encoding: .utf8).prefix(64))
        let good = directory.appendingPathComponent("good.bin")
        let bad = directory.appendingPathComponent("bad.bin")
        try await withDownloadManager(configuration: configuration(connections: 4)) { manager in
            let right = DownloadRequest(
                url: server.url("perconn/sum.bin"),
                destination: good,
                checksum: Checksum("sha256:\(digest)")
            )
            _ = try await manager.download(right).finished()
            let wrong = DownloadRequest(
                url: server.url("perconn/sum.bin"),
                destination: bad,
                checksum: Checksum("sha256:" + String(repeating: "0", count: 64))
            )
            await #expect { try await manager.download(wrong).finished() } throws: { error in
                (error as? DownloadError)?.code == .checksumMismatch
            }
        }
        #expect(try Data(contentsOf: good) == source)
        #expect(!FileManager.default.fileExists(atPath: bad.path))
        #expect(server.accessLog().filter { $0.uri == "/perconn/sum.bin" && $0.range.hasPrefix("bytes=") }.count >= 6)
    }

    @Test("cancelled while its connections run: every connection stops, nothing is left behind but a row saying so")
    func cancelWhileSegmented() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("cancel.bin", size: 8 * 1024 * 1024, seed: 24)
        let destination = directory.appendingPathComponent("cancel.bin")
        var configuration = configuration(connections: 4)
        configuration.stateDirectory = Self.stateDirectory(beside: destination)
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(from: server.url("crawl/cancel.bin"), to: destination)
            var events = download.events.makeAsyncIterator()
            await events.next {
                if case .progress(let p) = $0 { p.connections >= 2 && p.bytesReceived >= 512 * 1024 } else { false }
            }
            await download.cancel()
            await #expect { try await download.finished() } throws: { ($0 as? DownloadError)?.code == .cancelled }
            // The row says cancelled, its segments and bytes forgotten.
            let entry = manager.journalEntry(id: download.id)
            #expect(entry?.state == .cancelled && entry?.bytesReceived == 0, "\(String(describing: entry))")
        }
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        let leftovers =
            (try? FileManager.default.contentsOfDirectory(atPath: Self.stateDirectory(beside: destination).path)) ?? []
        #expect(!leftovers.contains { $0.hasSuffix(".part") }, "\(leftovers)")
    }

    @Test("a server that ignores ranges gets one connection and no error")
    func ignoresRanges() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let requests = try await fetch(
            "norange.bin",
            size: 2 * 1024 * 1024,
            from: "norange",
            connections: 4,
            server: server,
            into: directory
        )
        #expect(requests.count == 1)
        #expect(requests.first?.status == 200)
    }

    @Test("a file too small for two segments, or a download asked for one connection, uses one")
    func smallFileOneConnection() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let small = try server.makeFile("small.bin", size: 300 * 1024, seed: 7)
        let large = try server.makeFile("large.bin", size: 2 * 1024 * 1024, seed: 8)
        try await withDownloadManager(configuration: configuration(connections: 4)) { manager in
            _ = try await manager.download(from: server.url("small.bin"), to: directory.appendingPathComponent("s"))
                .finished()
            var request = DownloadRequest(
                url: server.url("large.bin"),
                destination: directory.appendingPathComponent("l")
            )
            request.connections = 1
            _ = try await manager.download(request).finished()
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("s")) == small)
        #expect(try Data(contentsOf: directory.appendingPathComponent("l")) == large)
        #expect(server.accessLog().filter { $0.uri == "/small.bin" }.count == 1)
        #expect(server.accessLog().filter { $0.uri == "/large.bin" }.count == 1)
    }

    @Test("the per-host limit holds: with 2 per host, a 4-connection download opens 2, beside nothing else")
    func perHostLimit() async throws {
        let (server, directory) = try await startServerAndDirectory(own: "the kernel's sockets to its port are counted")
        defer { stop(server, directory) }
        let size = 3 * 1024 * 1024
        let source = try server.makeFile("host.bin", size: size, seed: 9)
        let other = try server.makeFile("other.bin", size: 1024 * 1024, seed: 10)
        var configuration = configuration(connections: 4)
        configuration.maxConcurrentDownloadsPerHost = 2
        var most = 0
        let sampler = TCPTable.Sampler(port: server.port)
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(
                from: server.url("perconn/host.bin"),
                to: directory.appendingPathComponent("host.bin")
            )
            let second = try manager.download(
                from: server.url("perconn/other.bin"),
                to: directory.appendingPathComponent("other.bin")
            )
            for await event in download.events {
                if case .progress(let progress) = event { most = max(most, progress.connections) }
            }
            _ = try await download.finished()
            _ = try await second.finished()
        }
        let kernel = sampler.stop()
        #expect(try Data(contentsOf: directory.appendingPathComponent("host.bin")) == source)
        #expect(try Data(contentsOf: directory.appendingPathComponent("other.bin")) == other)
        #expect(most <= 2, "a download used \(most) connections with 2 allowed per host")
        #expect(server.accessLog().filter { $0.uri.hasPrefix("/perconn/") }.count >= 3)  // host.bin was split
        // The connections the kernel saw open to nginx at once (issue 75, item 5): never more than
        // two, and two at some point (both downloads run for a second or more at 1 MB/s each), which
        // also shows the sampler saw them at all. nginx's log, counted before, ends a request cut by
        // the client only when nginx notices: beside a busy machine it overlapped the next one.
        #expect(kernel.most == 2, "the kernel saw \(kernel.most) connections to nginx at once in \(kernel.looks) looks")
    }

    /// A manager whose requests `/crawl/` answers at full speed (`X-Speed: fast`): the first 256 KiB
    /// of each answer come at once, the rest at 64 KB/s without the header, so a download there is
    /// still running however late a loaded machine pauses it.
    func fast(_ configuration: DownloadManager.Configuration, beside destination: URL) -> DownloadManager.Configuration
    {
        var configuration = configuration
        configuration.headers = [DownloadHeader("X-Speed", "fast")]
        configuration.stateDirectory = Self.stateDirectory(beside: destination)
        return configuration
    }

    static func stateDirectory(beside destination: URL) -> URL {
        destination.deletingLastPathComponent().appendingPathComponent(".haul")
    }

    /// Starts a 4-connection download of `name` at `/crawl/`, pauses it once two connections wrote
    /// at least 512 KiB, and returns it with its paused progress; the manager is shut down.
    func startAndPause(_ name: String, server: NginxServer, to destination: URL) async throws -> (
        DownloadID, DownloadProgress?
    ) {
        var configuration = configuration(connections: 4)
        configuration.stateDirectory = Self.stateDirectory(beside: destination)
        let manager = try DownloadManager(configuration: configuration)
        let download = try manager.download(from: server.url("crawl/\(name)"), to: destination)
        var events = download.events.makeAsyncIterator()
        await events.next {
            if case .progress(let p) = $0 { p.connections >= 2 && p.bytesReceived >= 512 * 1024 } else { false }
        }
        await download.pause()
        let paused = await events.next { if case .paused = $0 { true } else { false } }
        await manager.shutdown()
        guard case .paused(let progress)? = paused else { return (download.id, nil) }
        return (download.id, progress)
    }

    @Test("paused and resumed: each segment continues from its own bytes, with If-Range")
    func pauseAndResume() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 8 * 1024 * 1024
        let source = try server.makeFile("pause.bin", size: size, seed: 11)
        let destination = directory.appendingPathComponent("pause.bin")
        let (id, paused) = try await startAndPause("pause.bin", server: server, to: destination)
        let progress = try #require(paused, "no paused event")
        #expect(progress.bytesReceived < Int64(size))
        // The pause's sync reported after the transfer left its slot: the row holds every segment's
        // bytes as durable (what a restart after a power loss keeps).
        let journal = try Journal(directory: Self.stateDirectory(beside: destination).path)
        let row = try #require(try journal.record(for: id.engine))
        journal.close()
        #expect(row.segments != nil)
        #expect(row.bytesSynced == progress.bytesReceived && row.bytesSynced > 0, "synced \(row.bytesSynced)")
        try await withDownloadManager(configuration: fast(configuration(connections: 4), beside: destination)) {
            manager in
            let download = try #require(manager.download(id: id))
            #expect(download.progress.bytesReceived == progress.bytesReceived)
            #expect(manager.journalEntry(id: id)?.bytesReceived == progress.bytesReceived)
            await download.resume()
            _ = try await download.finished()
        }
        #expect(try Data(contentsOf: destination) == source)
        let requests = await server.requests(to: "/crawl/pause.bin", atLeast: 5)
        let sent = requests.reduce(0) { $0 + $1.bytesSent }
        // A pause loses at most what the connections had in flight (nginx's socket buffers).
        #expect(sent < Int64(size) + 4 * 512 * 1024, "sent \(sent) for \(size)")
        // Every request but the very first asks for a range, pinned with If-Range.
        #expect(requests.filter { $0.range == "-" }.count == 1)
        #expect(requests.filter { $0.range != "-" }.allSatisfy { $0.status == 206 && $0.ifRange != "-" })
    }

    @Test("the file replaced on the server while paused: the resumed download is the new file, whole")
    func fileReplacedWhilePaused() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 8 * 1024 * 1024
        _ = try server.makeFile("replaced.bin", size: size, seed: 14)
        let destination = directory.appendingPathComponent("replaced.bin")
        let (id, paused) = try await startAndPause("replaced.bin", server: server, to: destination)
        #expect(paused != nil, "no paused event")
        let replacement = NginxServer.bytes(count: size - 4096, seed: 15)
        let staged = server.root.appendingPathComponent("replaced.tmp")
        try replacement.write(to: staged)
        _ = rename(staged.path, server.root.appendingPathComponent("replaced.bin").path)
        var restarts: [RestartReason] = []
        try await withDownloadManager(configuration: fast(configuration(connections: 4), beside: destination)) {
            manager in
            let download = try #require(manager.download(id: id))
            var events = download.events.makeAsyncIterator()
            await download.resume()
            while let event = await events.next() {
                if case .restarted(let reason) = event { restarts.append(reason) }
            }
            _ = try await download.finished()
        }
        #expect(try Data(contentsOf: destination) == replacement)
        #expect(restarts == [.remoteChanged], "restarts: \(restarts)")
    }

    @Test("the file replaced on the server mid-download: never spliced; the new file whole once a request sees it")
    func fileReplaced() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 16 * 1024 * 1024
        let older = try server.makeFile("changing.bin", size: size, seed: 12)
        let destination = directory.appendingPathComponent("changing.bin")
        var restarts: [RestartReason] = []
        let (newer, replacedAt) = try await withDownloadManager(configuration: configuration(connections: 4)) {
            manager in
            // At /uneven/ the first connection finishes its segment at 8 MiB/s while the others crawl at
            // 1 MiB/s: connections that finish split the others' segments for about three seconds,
            // each split a new request, which sees the new file once it is there.
            let download = try manager.download(from: server.url("uneven/changing.bin"), to: destination)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived > 0 } else { false } }
            // Replaced by rename (as a deploy does): answers in flight keep the old file, new ones
            // get the new one, with another length and ETag.
            let replacement = NginxServer.bytes(count: size + 4096, seed: 13)
            let staged = server.root.appendingPathComponent("changing.tmp")
            try replacement.write(to: staged)
            let replacedAt = Date().timeIntervalSince1970
            _ = rename(staged.path, server.root.appendingPathComponent("changing.bin").path)
            while let event = await events.next() {
                if case .restarted(let reason) = event { restarts.append(reason) }
            }
            _ = try await download.finished()
            return (replacement, replacedAt)
        }
        let result = try Data(contentsOf: destination)
        let requests = server.accessLog().filter { $0.uri == "/uneven/changing.bin" }
        // nginx's times are to the millisecond, and a request is logged from its first byte read.
        let afterReplacement = requests.filter { $0.startedAt > replacedAt + 0.01 }
        if afterReplacement.isEmpty {
            // Every request went out before the file changed (a loaded machine): the old file, whole.
            #expect(result == older)
            #expect(restarts.isEmpty)
        } else {
            #expect(result == newer)
            #expect(restarts == [.remoteChanged], "restarts: \(restarts)")
        }
        print(
            "replaced mid-download: \(afterReplacement.isEmpty ? "finished from the old file" : "restarted on the new one")"
        )
    }
}
