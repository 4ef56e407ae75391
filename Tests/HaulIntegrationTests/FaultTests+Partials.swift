import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// A partial file on disk against servers that misbehave: it is kept, continued or started over, never spliced.
extension FaultTests {
    /// Leaves a partial file of the route's first `count` bytes, as a run killed before it wrote its
    /// journal would: no validator, so by default it starts over, and with ``unvalidated(_:)`` the
    /// resume is checked by its overlap (half of it, below 64 KiB) and Content-Range.
    func seedPartial(_ path: String, server: FaultServer, directory: URL, bytes: Data) throws {
        let state = directory.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let id = DownloadID(destination: directory.appendingPathComponent("out"))
        try bytes.write(to: state.appendingPathComponent("\(id).part"))
    }

    @Test(
        "a partial from an earlier run resumed against a misbehaving server still ends whole",
        arguments: [
            "drop/50000/200000", "stall/30000/200000", "busy/503/1/0/200000", "busy/429/1/0/200000",
            "short/200000", "drip/20000/20/200000",
        ]
    )
    func partialAgainstMisbehaviour(path: String) async throws {
        try await withFaultServer { server, directory in
            let body = FaultServer.body(size: 200_000)
            try seedPartial(path, server: server, directory: directory, bytes: body.prefix(40_000))
            let (_, result) = try await fetch(
                path,
                from: server,
                into: directory,
                configuration: unvalidated(configuration(directory))
            )
            #expect(throws: Never.self) { try result.get() }
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == body)
            // The first request that could carry a body asked for the rest (after its overlap), not
            // for everything.
            let ranged = server.requests(to: "/\(path)").first { $0.status != 503 && $0.status != 429 }
            #expect(ranged?.range == "bytes=20000-" && ranged?.status == 206)
        }
    }

    /// `configuration` with unvalidated resumes on.
    func unvalidated(_ configuration: DownloadManager.Configuration) -> DownloadManager.Configuration {
        var configuration = configuration
        configuration.resumesWithoutValidator = true
        return configuration
    }

    @Test(
        "a partial from an earlier run is kept when the server now fails permanently",
        arguments: ["status/404", "loop"]
    )
    func partialKeptOnPermanentFailure(path: String) async throws {
        try await withFaultServer { server, directory in
            try seedPartial(
                path,
                server: server,
                directory: directory,
                bytes: FaultServer.body(size: 200_000).prefix(40_000)
            )
            let (events, result) = try await fetch(
                path,
                from: server,
                into: directory,
                configuration: configuration(directory)
            )
            #expect(throws: DownloadError.self) { try result.get() }
            #expect(retries(in: events).isEmpty)
            let id = DownloadID(destination: directory.appendingPathComponent("out"))
            let partial = directory.appendingPathComponent("state/\(id).part")
            #expect(FilePath.fileLength(partial.path) == 40_000, "kept for a later resume")
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("out").path))
        }
    }

    @Test(
        "a partial resumed against a server that ignores Range: read past once its last bytes match, restarted when not",
        arguments: [true, false]
    )
    func partialAgainstIgnoredRange(partialIsTheFile: Bool) async throws {
        try await withFaultServer { server, directory in
            let body = FaultServer.body(size: 200_000)
            let partial = partialIsTheFile ? body.prefix(70_000) : FaultServer.body(size: 70_000, version: 2)
            try seedPartial("norange/200000", server: server, directory: directory, bytes: partial)
            let (events, result) = try await fetch(
                "norange/200000",
                from: server,
                into: directory,
                configuration: unvalidated(configuration(directory))
            )
            #expect(throws: Never.self) { try result.get() }
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == body)
            // Unvalidated: the whole answer's bytes 35,000-69,999 are compared with the partial's;
            // the partial is kept when they match, and the file starts over when they differ.
            // (A mismatch ends that answer: the file is asked for again, from its start.)
            #expect(restarts(in: events) == (partialIsTheFile ? [] : [.overlapMismatch]))
            let ranges = server.requests(to: "/norange/200000").map(\.range)
            #expect(ranges == (partialIsTheFile ? ["bytes=35000-"] : ["bytes=35000-", nil]))
        }
    }

    @Test(
        "two servers behind one name, one ignoring Range: its answer, cut short, takes nothing from the partial; the next resumes from it"
    )
    func mixedServersKeepThePartial() async throws {
        try await withFaultServer { server, directory in
            let path = "mixed/150000/60000/300000"
            let (events, result) = try await fetch(
                path,
                from: server,
                into: directory,
                configuration: patient(directory)
            )
            #expect(throws: Never.self) { try result.get() }
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 300_000))
            // The resume's whole answer (200, the same strong ETag, its If-Range ignored) was cut
            // while its first bytes were compared with the partial's; from then on the range is asked
            // without If-Range, 64 KiB before the partial's end (those bytes compared). The answer
            // that ignored it too repeated bytes the partial had, and was cut before their end: the
            // next asks from the same place again.
            let requests = server.requests(to: "/\(path)")
            let overlapStart = 150_000 - 65_536
            #expect(requests.first?.range == nil && requests.first?.status == 200)
            #expect(requests.dropFirst().first?.range == "bytes=150000-" && requests.dropFirst().first?.ifRange != nil)
            #expect(
                requests.dropFirst(2).allSatisfy { $0.range == "bytes=\(overlapStart)-" },
                "\(requests.map(\.range))"
            )
            #expect(requests.last?.status == 206 && requests.last?.ifRange == nil, "\(requests)")
            #expect(events.contains(.warning(.repeatedBytesReadPast(150_000, reason: .rangeIgnored))))
            #expect(requests.contains { $0.ifRange == nil && $0.status == 200 && $0.range != nil }, "\(requests)")
            #expect(restarts(in: events).isEmpty)
        }
    }

    @Test("a partial resumed against a 206 that starts elsewhere: restarted from zero, never spliced")
    func partialAgainstWrongRange() async throws {
        try await withFaultServer { server, directory in
            let body = FaultServer.body(size: 200_000)
            try seedPartial("badrange/200000", server: server, directory: directory, bytes: body.prefix(70_000))
            let (events, result) = try await fetch(
                "badrange/200000",
                from: server,
                into: directory,
                configuration: unvalidated(configuration(directory))
            )
            #expect(throws: Never.self) { try result.get() }
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == body)
            #expect(restarts(in: events).count == 1)
            #expect(server.requests(to: "/badrange/200000").map(\.range) == ["bytes=35000-", nil])
        }
    }

    @Test("a partial of one version resumed against a changed file: the new version, whole")
    func partialAgainstChangedFile() async throws {
        try await withFaultServer { server, directory in
            // The first run fails after 60 KB of version 1 (no retries), keeping the partial.
            let (_, first) = try await fetch(
                "changing/60000/250000",
                from: server,
                into: directory,
                configuration: configuration(directory, retryLimit: 0)
            )
            #expect(throws: DownloadError.self) { try first.get() }
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("out").path))
            // The next run asks for the rest of version 1 (If-Range), gets version 2 whole.
            let (events, second) = try await fetch(
                "changing/60000/250000",
                from: server,
                into: directory,
                configuration: configuration(directory)
            )
            #expect(throws: Never.self) { try second.get() }
            #expect(
                try Data(contentsOf: directory.appendingPathComponent("out"))
                    == FaultServer.body(size: 250_000, version: 2)
            )
            #expect(restarts(in: events) == [.remoteChanged])
            let requests = server.requests(to: "/changing/60000/250000")
            #expect(requests.map(\.range) == [nil, "bytes=60000-"])
            #expect(requests.last?.ifRange == "\"v1-250000\"")
            #expect(requests.map(\.status) == [200, 200])
        }
    }

    @Test("a partial from a run that failed on drops is resumed by the next run")
    func partialFromAFailedRun() async throws {
        try await withFaultServer { server, directory in
            let (_, first) = try await fetch(
                "drop/80000/200000",
                from: server,
                into: directory,
                configuration: configuration(directory, retryLimit: 0)
            )
            if case .failure(let error) = first {
                #expect(error.isTransient)
            } else {
                Issue.record("the first run must fail")
            }
            let journal = try Journal(directory: directory.appendingPathComponent("state").path)
            let id = DownloadID(destination: directory.appendingPathComponent("out")).engine
            #expect(try journal.record(for: id)?.state == .failed)
            #expect(try journal.record(for: id)?.bytesCommitted == 80_000)
            journal.close()
            let (_, second) = try await fetch(
                "drop/80000/200000",
                from: server,
                into: directory,
                configuration: configuration(directory)
            )
            #expect(throws: Never.self) { try second.get() }
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 200_000))
            #expect(server.requests(to: "/drop/80000/200000").map(\.range) == [nil, "bytes=80000-", "bytes=160000-"])
        }
    }
}
