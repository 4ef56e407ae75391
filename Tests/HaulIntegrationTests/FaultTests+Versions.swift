import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 38, items 3–5: what CDNs and load balancers really send. An error page as 200 is never taken
/// for the file, an ignored ETag `If-Range` is asked again in a form the server honours, and two
/// versions behind one name end on one of them, whole.
extension FaultTests {
    @Test(
        "a resume answered by another version, then by an error page as 200: the page is a failed attempt; the new version, whole"
    )
    func errorPageAfterARestart() async throws {
        try await withFaultServer { server, directory in
            let (events, result) = try await fetch(
                "relabel/100000/400000",
                from: server,
                into: directory,
                configuration: patient(directory)
            )
            #expect(try result.get() == directory.appendingPathComponent("out"))
            // Before: the 79-byte page was the file, "completed".
            #expect(
                try Data(contentsOf: directory.appendingPathComponent("out"))
                    == FaultServer.body(size: 400_000, version: 2)
            )
            let requests = server.requests(to: "/relabel/100000/400000")
            #expect(requests.map(\.status) == [200, 206, 200, 200])
            #expect(requests[2].bytesSent == FaultServer.errorPage.utf8.count && requests[2].range == nil)
            #expect(restarts(in: events) == [.remoteChanged])
            #expect(retries(in: events).contains { $0.0.code == .unexpectedAnswer })
        }
    }

    @Test(
        "a CDN that ignores an ETag If-Range: the whole answer is stopped at once and the range asked with the date; the host is remembered"
    )
    func entityTagIfRangeIgnored() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: patient(directory)) { manager in
                for (size, name) in [(400_000, "first"), (300_000, "second")] {
                    let download = try manager.download(
                        from: server.url("etag-ignored/100000/\(size)"),
                        to: directory.appendingPathComponent(name)
                    )
                    var restarted: [RestartReason] = []
                    for await event in download.events {
                        if case .restarted(let reason) = event { restarted.append(reason) }
                    }
                    _ = try await download.finished()
                    #expect(
                        try Data(contentsOf: directory.appendingPathComponent(name)) == FaultServer.body(size: size)
                    )
                    #expect(restarted.isEmpty, "\(name): restarted \(restarted)")
                }
            }
            let first = server.requests(to: "/etag-ignored/100000/400000")
            let date = FaultServer.httpDate(784_111_777)
            // The interrupted first answer; the resume with the ETag, answered whole (and stopped);
            // the same range with the date, answered with the rest.
            #expect(first.map(\.range) == [nil, "bytes=100000-", "bytes=100000-"])
            #expect(first.map(\.ifRange) == [nil, "\"v1-400000\"", date])
            #expect(first.map(\.status) == [200, 200, 206])
            #expect(first[2].bytesSent == 300_000)
            // The second file's resume goes straight to the date.
            let second = server.requests(to: "/etag-ignored/100000/300000")
            #expect(second.map(\.ifRange) == [nil, date])
            #expect(second.map(\.status) == [200, 206])
            print("an ETag-ignoring CDN: the stopped whole answer sent \(first[1].bytesSent) bytes (socket buffers)")
        }
    }

    @Test("the same CDN without a strong date: the range is asked with no If-Range, and its 206 must carry the ETag")
    func entityTagIfRangeIgnoredWithoutADate() async throws {
        try await withFaultServer { server, directory in
            let (events, result) = try await fetch(
                "etag-ignored-nodate/100000/400000",
                from: server,
                into: directory,
                configuration: patient(directory)
            )
            _ = try result.get()
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 400_000))
            let requests = server.requests(to: "/etag-ignored-nodate/100000/400000")
            #expect(requests.map(\.ifRange) == [nil, "\"v1-400000\"", nil])
            // Without If-Range, the range starts before the partial's end (half of it: 50,000): those
            // bytes must be the partial's (a file changed under the same ETag is not spliced on).
            #expect(requests.map(\.range) == [nil, "bytes=100000-", "bytes=50000-"])
            #expect(requests.map(\.status) == [200, 200, 206])
            #expect(restarts(in: events).isEmpty)
        }
    }

    @Test(
        "two backends with different versions behind one name, 4 connections: one connection, one version, whole; the event says why"
    )
    func twoVersionsBehindOneName() async throws {
        try await withFaultServer { server, directory in
            let (configuration, size) = (fourConnections(directory), 2 * 1024 * 1024)
            let (events, result) = try await fetch(
                "twoversions/\(size)",
                from: server,
                into: directory,
                configuration: configuration
            )
            _ = try result.get()
            let file = try Data(contentsOf: directory.appendingPathComponent("out"))
            #expect(
                file == FaultServer.body(size: size, version: 1) || file == FaultServer.body(size: size, version: 2)
            )
            #expect(events.contains(.warning(.versionsDiffer)), "restarts: \(restarts(in: events))")
            #expect(restarts(in: events).allSatisfy { $0 == .remoteChanged } && restarts(in: events).count <= 2)
        }
    }

    @Test(
        "the same CDN under 4 connections: each segment's ignored If-Range is asked again with the date; nothing restarts"
    )
    func entityTagIfRangeIgnoredBySegments() async throws {
        try await withFaultServer { server, directory in
            let (configuration, size) = (fourConnections(directory), 2 * 1024 * 1024)
            let (events, result) = try await fetch(
                "etag-ignored-slow/\(size)",
                from: server,
                into: directory,
                configuration: configuration
            )
            _ = try result.get()
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: size))
            #expect(restarts(in: events).isEmpty, "\(restarts(in: events))")
            let requests = server.requests(to: "/etag-ignored-slow/\(size)")
            let date = FaultServer.httpDate(784_111_777)
            // Segments went out; those asked with the ETag were answered whole (and stopped), then
            // asked again with the date, which the CDN honours.
            #expect(requests.contains { $0.ifRange == date && $0.status == 206 }, "\(requests.map(\.ifRange))")
            #expect(requests.filter { $0.ifRange?.hasPrefix("\"") == true }.allSatisfy { $0.status == 200 })
        }
    }

    /// ``patient(_:)`` over 4 connections, with segments of 128 KiB at least (a 2 MiB file splits).
    func fourConnections(_ directory: URL) -> DownloadManager.Configuration {
        var configuration = patient(directory)
        configuration.connectionsPerFile = 4
        configuration.minimumSegmentSize = 128 * 1024
        return configuration
    }
}

/// Issue 56, item 1: an answer from byte 0 that carries the pinned strong validator is read past the
/// bytes held only while they are the same bytes: a broken origin (or a CDN that rewrites bodies)
/// repeats its ETag over another body.
extension FaultTests {
    @Test(
        "one ETag over other bytes, answers cut short: each read past stops at the first difference; the last version, whole"
    )
    func sameTagOtherBytes() async throws {
        try await withFaultServer { server, directory in
            // Request k gets version k, all with ETag "same"; the first three are cut at k × 100,000.
            let path = "sametag/3/100000/400000"
            let (events, result) = try await fetch(
                path,
                from: server,
                into: directory,
                configuration: patient(directory)
            )
            #expect(throws: Never.self) { try result.get() }
            // The file is the version of the last answer, whole, which was asked for from byte 0.
            // Before: versions 1, 3 and 4 spliced at 100,000 and 300,000, "completed".
            let requests = server.requests(to: "/\(path)")
            #expect(
                try Data(contentsOf: directory.appendingPathComponent("out"))
                    == FaultServer.body(size: 400_000, version: requests.count)
            )
            #expect(requests.allSatisfy { $0.status == 200 })
            #expect(requests.last?.range == nil, "\(requests)")
            // Each resume's whole answer (its If-Range ignored, the same ETag) was compared with the
            // partial from its first byte, and differed there: the file started over, each time.
            let resumes = requests.filter { $0.range != nil }
            #expect(!resumes.isEmpty, "\(requests)")
            #expect(restarts(in: events) == resumes.map { _ in .overlapMismatch })
        }
    }
}

/// Issue 74, item 3: a resume no `If-Range` protects (the host ignores an ETag one) is continued only
/// where bytes prove it: the whole answer it ignored the range with must begin as the partial does,
/// and the plain range starts before the partial's end, its overlap compared.
extension FaultTests {
    /// Fetches a file of 1,000,000 bytes whose first answer is cut at 300,000, on a server that
    /// ignores an ETag `If-Range` and then serves version 2 under the same ETag, keeping version 1's
    /// first `shared` bytes (`/etag-kept/`); checks that the file is that version 2, whole. The
    /// download's events and the requests the server saw.
    func fetchChangedUnderOneTag(keeping shared: Int) async throws -> ([DownloadEvent], [FaultServer.Request]) {
        try await withFaultServer { server, directory in
            let path = "etag-kept/300000/\(shared)/1000000"
            let (events, result) = try await fetch(
                path,
                from: server,
                into: directory,
                configuration: patient(directory)
            )
            _ = try result.get()
            var expected = FaultServer.body(size: 1_000_000, version: 2)
            expected.replaceSubrange(0..<shared, with: FaultServer.body(size: shared))
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == expected)
            return (events, server.requests(to: "/\(path)"))
        }
    }

    @Test(
        "a file changed under the same ETag, If-Range ignored: the whole answer's first bytes differ, so it starts over; the new version, whole"
    )
    func sameTagChangedFile() async throws {
        // Before: 300,000 bytes of version 1, then the plain range's 700,000 of version 2, completed.
        let (events, requests) = try await fetchChangedUnderOneTag(keeping: 0)
        // The cut first answer; the resume, answered whole and stopped at its first bytes; the whole
        // file again. No plain range was sent.
        #expect(requests.map(\.status) == [200, 200, 200], "\(requests)")
        #expect(requests.map(\.range) == [nil, "bytes=300000-", nil], "\(requests)")
        #expect(restarts(in: events) == [.overlapMismatch])
    }

    @Test(
        "a file changed under the same ETag past its first bytes: the plain range starts before the partial's end and its overlap differs; the new version, whole"
    )
    func sameTagChangedInTheOverlap() async throws {
        // Version 2 keeps version 1's first 280,000 bytes; the partial holds 300,000.
        let (events, requests) = try await fetchChangedUnderOneTag(keeping: 280_000)
        // The resume's whole answer began as the partial does (asked again, with no If-Range), the
        // plain range 64 KiB before the partial's end, then the whole file.
        #expect(requests.map(\.range) == [nil, "bytes=300000-", "bytes=\(300_000 - 65_536)-", nil], "\(requests)")
        #expect(requests.map(\.ifRange) == [nil, "\"same\"", nil, nil], "\(requests)")
        #expect(requests.map(\.status) == [200, 200, 206, 200], "\(requests)")
        #expect(restarts(in: events) == [.overlapMismatch])
    }

    @Test("the same server, the file unchanged past the partial: the overlap matches and the rest is appended")
    func sameTagChangedAfterThePartial() async throws {
        // Version 2 keeps version 1's first 400,000 bytes: continuing at 300,000 gives version 2 exactly.
        let (events, requests) = try await fetchChangedUnderOneTag(keeping: 400_000)
        #expect(requests.map(\.status) == [200, 200, 206], "\(requests)")
        #expect(requests[2].bytesSent == 700_000 + 65_536, "\(requests)")
        #expect(restarts(in: events).isEmpty)
    }
}
