import Foundation
import Synchronization
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulTransfer
@testable import HaulValues

@Suite("A segmented download after a reboot")
struct SegmentedRebootTests {
    @Test("after a reboot each segment is cut back to its own synced bytes, and the file still ends byte-identical")
    func eachSegmentCutBack() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let size = 8 * 1024 * 1024
        let data = try server.makeFile("seg.bin", size: size, seed: 31)
        let destination = directory.appendingPathComponent("seg.bin")
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.bootIDOverride = "boot-one"
        configuration.connectionsPerFile = 4
        configuration.minimumSegmentSize = 256 * 1024
        configuration.bufferSize = 64 * 1024

        let first = try DownloadManager(configuration: configuration)
        // At /crawl/ each connection gets 256 KiB at once, then 64 KB/s: still running when paused,
        // however late; the second manager's requests say `X-Speed: fast`, and get it all at once.
        let download = try first.download(from: server.url("crawl/seg.bin"), to: destination)
        var events = download.events.makeAsyncIterator()
        await events.next {
            if case .progress(let p) = $0 { p.connections >= 2 && p.bytesReceived >= 1024 * 1024 } else { false }
        }
        await download.pause()
        await events.next { if case .paused = $0 { true } else { false } }
        await first.shutdown()  // waits for the pause's background sync to be recorded

        // The row's map: each segment synced as far as written. Then a power loss's damage: garbage
        // after each segment's synced bytes, and a row claiming more than was synced.
        let journal = try Journal(directory: configuration.stateDirectory!.path, bootID: "boot-one")
        var record = try #require(try journal.record(for: download.id.engine))
        var map = try #require(record.segments.flatMap { SegmentMap(encoded: $0, total: Int64(size)) })
        #expect(map.segments.filter { $0.synced > 0 }.count >= 2)
        #expect(map.segments.allSatisfy { $0.synced == $0.written })
        let partial = try #require(journal.partialPath(for: download.id.engine))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: partial))
        var claimed: [SegmentMap.Segment] = []
        for segment in map.segments where segment.remaining >= 50_000 {
            try handle.seek(toOffset: UInt64(segment.next))
            try handle.write(contentsOf: Data(repeating: 0xEE, count: 50_000))
            var longer = segment
            longer.written += 50_000
            claimed.append(longer)
        }
        try handle.close()
        let synced = map
        map = SegmentMap(
            segments: map.segments.map { segment in claimed.first { $0.start == segment.start } ?? segment },
            total: map.total
        )
        #expect(map.isValid)
        record.segments = map.encoded
        record.bytesCommitted = map.bytesWritten
        try journal.save(record, for: download.id.engine)
        journal.close()

        configuration.bootIDOverride = "boot-two"
        configuration.headers = [DownloadHeader("X-Speed", "fast")]
        try await withDownloadManager(configuration: configuration) { manager in
            let restored = try #require(manager.download(id: download.id))
            #expect(restored.progress.bytesReceived == synced.bytesWritten)
            await restored.resume()
            #expect(try await restored.finished() == destination)
        }
        #expect(try Data(contentsOf: destination) == data)
        // The resumed requests start where each segment was synced.
        let starts = Set(
            server.accessLog().compactMap { entry -> Int64? in
                guard entry.uri == "/crawl/seg.bin", entry.range.hasPrefix("bytes=") else { return nil }
                return Int64(entry.range.dropFirst(6).prefix { $0 != "-" })
            }
        )
        for segment in synced.segments where !segment.isDone {
            #expect(starts.contains(segment.next), "no request from \(segment.next): \(starts.sorted())")
        }
    }
}

@Suite("Secrets on disk")
struct SecretsOnDiskTests {
    @Test("a URL's user name and password work as basic auth, and reach neither the journal nor the listing")
    func urlCredentials() async throws {
        let (server, directory) = try await startServerAndDirectory(
            own: "its URL is written by hand, with a password, from the port"
        )
        defer { stop(server, directory) }
        let source = try server.makeFile("p.bin", size: 300_000, seed: 41)
        let state = directory.appendingPathComponent("state")
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        let authorized = try #require(
            URL(string: "http://alice:\(NginxServer.password)@127.0.0.1:\(server.port)/private/p.bin")
        )
        let anonymous = server.url("private/p.bin")
        let (placed, refused) = try await withDownloadManager(configuration: configuration) { manager in
            let placed = try await manager.download(from: authorized, to: directory.appendingPathComponent("p.bin"))
                .finished()
            let refused = try manager.download(from: anonymous, to: directory.appendingPathComponent("q.bin"))
            do {
                _ = try await refused.finished()
                return (placed, nil as DownloadError?)
            } catch let error as DownloadError {
                return (placed, error)
            }
        }
        #expect(try Data(contentsOf: placed) == source)
        #expect(refused?.httpStatus == 401)
        #expect(server.accessLog().filter { $0.uri == "/private/p.bin" }.map(\.status) == [200, 401])
        // The journal, its WAL and everything beside them: no password, and private.
        var status = stat()
        #expect(stat(state.path, &status) == 0 && status.st_mode & 0o777 == 0o700)
        for name in try FileManager.default.contentsOfDirectory(atPath: state.path) {
            let bytes = try Data(contentsOf: state.appendingPathComponent(name))
            #expect(bytes.range(of: Data(NginxServer.password.utf8)) == nil, "\(name) holds the password")
            #expect(stat(state.appendingPathComponent(name).path, &status) == 0 && status.st_mode & 0o077 == 0)
        }
        let entries = try DownloadManager.journalEntries(stateDirectory: state)
        #expect(entries.map(\.url).contains("http://127.0.0.1:\(server.port)/private/p.bin"))
        #expect(!entries.contains { $0.url.contains(NginxServer.password) })
    }

    @Test("a journal of an earlier version, readable by all, is made private when opened")
    func earlierJournalIsMadePrivate() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let journal = try Journal(directory: directory.path)
            journal.close()
        }
        let path = directory.appendingPathComponent(Journal.fileName).path
        #expect(chmod(path, 0o644) == 0)
        let journal = try Journal(directory: directory.path)
        defer { journal.close() }
        var status = stat()
        #expect(stat(path, &status) == 0 && status.st_mode & 0o777 == 0o600)
    }

    @Test("a URL with credentials queued with enqueue (no handle) still sends them when admitted")
    func enqueuedCredentials() async throws {
        let (server, directory) = try await startServerAndDirectory(
            own: "its URL is written by hand, with a password, from the port"
        )
        defer { stop(server, directory) }
        let source = try server.makeFile("e.bin", size: 200_000, seed: 42)
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        let url = try #require(
            URL(string: "http://alice:\(NginxServer.password)@127.0.0.1:\(server.port)/private/e.bin")
        )
        let destination = directory.appendingPathComponent("e.bin")
        try await withDownloadManager(configuration: configuration) { manager in
            let summary = try manager.enqueue([DownloadRequest(url: url, destination: destination)])
            #expect(summary.queued == 1)
            await manager.waitUntilIdle()
        }
        #expect(try Data(contentsOf: destination) == source)
        #expect(server.accessLog().filter { $0.uri == "/private/e.bin" }.map(\.status) == [200])
    }
}

@Suite("A download's identity")
struct IdentityTests {
    @Test("a signed URL refreshed between runs (?sig=A, then ?sig=B) continues the same download from its bytes")
    func refreshedURLContinues() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("s.bin", size: 3_000_000, seed: 43)
        let state = directory.appendingPathComponent("state")
        let destination = directory.appendingPathComponent("s.bin")
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = state
        // The first run: 1 MiB at once, then slow; interrupted by its manager's shutdown.
        let kept = try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(from: server.url("gated/s.bin?sig=AAA"), to: destination)
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 1_048_576 } else { false } }
            return download.id
        }
        #expect(kept == DownloadID(destination: destination))
        let partials = try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasSuffix(".part") }
        #expect(partials == ["\(kept).part"])
        let before = try #require(FilePath.fileLength(state.appendingPathComponent("\(kept).part").path))
        // The second run asks with a fresh signature. (It does not resume unfinished downloads by
        // itself: that would race the request, and continue with the old URL's signature.)
        configuration.resumesUnfinishedDownloads = false
        try await withDownloadManager(configuration: configuration) { manager in
            let download = try manager.download(from: server.url("s.bin?sig=BBB"), to: destination)
            #expect(download.id == kept)
            #expect(try await download.finished() == destination)
        }
        #expect(try Data(contentsOf: destination) == source)
        let fresh = server.accessLog().filter { $0.uri == "/s.bin?sig=BBB" }
        // One request, for the rest and the overlap before it (the URL changed), pinned by If-Range.
        #expect(fresh.count == 1 && fresh[0].status == 206 && fresh[0].ifRange != "-", "\(server.accessLog())")
        #expect(fresh[0].range == "bytes=\(before - 65_536)-", "\(fresh)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasSuffix(".part") }.isEmpty
        )
        #expect(
            try DownloadManager.journalEntries(stateDirectory: state).map(\.url) == [
                server.url("s.bin?sig=BBB").absoluteString
            ]
        )
    }

    @Test("the plan across URLs: a validator is not trusted alone, the overlap is checked too")
    func planAcrossURLs() {
        #expect(
            ResumePlan.decide(offset: 500_000, validator: "\"t\"", resumesWithoutValidator: false, urlChanged: true)
                == .verify(rangeStart: 500_000 - 65_536, offset: 500_000, ifRange: "\"t\"")
        )
        #expect(
            ResumePlan.decide(offset: 500_000, validator: nil, resumesWithoutValidator: false, urlChanged: true)
                == .restart(.noValidator)
        )
    }

    @Test(
        "the plan on a host that ignores If-Range: the plain Range starts before the partial's end, its overlap checked"
    )
    func planWhereIfRangeIsIgnored() {
        #expect(
            ResumePlan.decide(offset: 300_000, validator: "\"t\"", resumesWithoutValidator: false, ifRangeIgnored: true)
                == .verify(rangeStart: 300_000 - 65_536, offset: 300_000, ifRange: "\"t\"")
        )
        #expect(
            ResumePlan.decide(offset: 300_000, validator: "\"t\"", resumesWithoutValidator: false)
                == .resume(from: 300_000, ifRange: "\"t\"")
        )
        #expect(
            ResumePlan.decide(offset: 300_000, validator: nil, resumesWithoutValidator: false, ifRangeIgnored: true)
                == .restart(.noValidator)
        )
    }
}

@Suite("User agents")
struct UserAgentTests {
    @Test("a request's user agent is sent instead of the manager's, and recorded for a later process")
    func perRequest() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("u1.bin", size: 10_000, seed: 44)
        _ = try server.makeFile("u2.bin", size: 10_000, seed: 45)
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.maxConcurrentDownloads = 1  // one easy handle serves both, one after the other
        try await withDownloadManager(configuration: configuration) { manager in
            _ = try manager.enqueue([
                DownloadRequest(
                    url: server.url("u1.bin"),
                    destination: directory.appendingPathComponent("u1.bin"),
                    userAgent: "Custom/1.0"
                ),
                DownloadRequest(url: server.url("u2.bin"), destination: directory.appendingPathComponent("u2.bin")),
            ])
            await manager.waitUntilIdle()
        }
        let log = server.accessLog()
        #expect(log.first { $0.uri == "/u1.bin" }?.userAgent == "Custom/1.0")
        #expect(log.first { $0.uri == "/u2.bin" }?.userAgent == "Haul/\(DownloadManager.version)")
        let journal = try Journal(directory: directory.appendingPathComponent("state").path)
        defer { journal.close() }
        let recorded = try journal.record(
            for: DownloadID(destination: directory.appendingPathComponent("u1.bin")).engine
        )
        #expect(recorded?.userAgent == "Custom/1.0")
    }
}

@Suite("Response metadata")
struct ResponseMetadataTests {
    @Test("a download tells the final URL after redirects, the Content-Type, the validators and the length")
    func metadata() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        _ = try server.makeFile("m.bin", size: 123_456, seed: 46)
        _ = try server.makeFile("blocker.bin", size: 1024 * 1024 + 64 * 1024, seed: 47)
        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("state")
        configuration.maxConcurrentDownloads = 1
        let response = try await withDownloadManager(configuration: configuration) { manager in
            // The one slot is held (/gated/: 1 MiB at once, then 1 KB/s): m.bin waits in the queue,
            // asked for nothing yet, however late this task runs.
            let blocker = try manager.download(
                from: server.url("gated/blocker.bin"),
                to: directory.appendingPathComponent("blocker.bin")
            )
            var events = blocker.events.makeAsyncIterator()
            await events.next { if case .receiving = $0 { true } else { false } }
            let download = try manager.download(
                from: server.url("redirect/m.bin"),
                to: directory.appendingPathComponent("m.bin")
            )
            #expect(download.response == nil)
            await blocker.cancel()
            _ = try await download.finished()
            return download.response
        }
        let seen = try #require(response)
        #expect(seen.url == server.url("m.bin"))  // nginx's /redirect/ sent it there
        #expect(seen.status == 200 && seen.totalBytes == 123_456)
        #expect(seen.contentType == "text/plain")  // the test nginx has no mime.types: its default_type
        #expect(seen.entityTag?.hasPrefix("\"") == true && seen.lastModified?.hasSuffix("GMT") == true)
    }
}

@Suite("Journals beside many folders")
struct ManyFoldersTests {
    @Test("without a state directory, a journal whose downloads are all done is closed, and opens again when asked")
    func idleJournalsClose() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("f.bin", size: 2_000, seed: 47)
        let folders = (0..<200).map { directory.appendingPathComponent("folder-\($0)") }
        let configuration = DownloadManager.Configuration()  // a .haul beside each destination
        try await withDownloadManager(configuration: configuration) { manager in
            let summary = try manager.enqueue(
                folders.map {
                    DownloadRequest(url: server.url("f.bin"), destination: $0.appendingPathComponent("f.bin"))
                }
            )
            #expect(summary.queued == 200)
            await manager.waitUntilIdle()
            // 200 journals were opened; none is held now (each held 3 descriptors and its page cache).
            let held = Descriptors.files(in: directory.path).filter { $0.contains("/.haul/journal") }
            #expect(held.isEmpty, "\(held.count) journal files still open")
            // Asked for again, one opens its journal and finds the file complete.
            let again = try manager.download(from: server.url("f.bin"), to: folders[7].appendingPathComponent("f.bin"))
            #expect(try await again.finished() == folders[7].appendingPathComponent("f.bin"))
            #expect(again.wasAlreadyComplete)
        }
        for folder in folders { #expect(try Data(contentsOf: folder.appendingPathComponent("f.bin")) == source) }
        #expect(server.accessLog().filter { $0.uri == "/f.bin" }.count == 200)
    }
}
