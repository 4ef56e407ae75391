import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulTransfer

/// A partial file is continued only when something proves its bytes are the remote file's current
/// ones (issue 17, item 1): a strong validator, or (opted in) an overlap that matches.
@Suite("Resumes without a validator", .timeLimit(.minutes(2)))
struct ResumeValidationTests {
    let faults = FaultTests()

    func configuration(_ directory: URL, unvalidated: Bool = false) -> DownloadManager.Configuration {
        var configuration = faults.patient(directory)
        configuration.resumesWithoutValidator = unvalidated
        return configuration
    }

    // MARK: the pure plan

    @Test("the plan: a strong validator resumes, none restarts, the opt-in or a capped range verifies")
    func plan() {
        #expect(
            ResumePlan.decide(offset: 0, validator: nil, resumesWithoutValidator: false)
                == .resume(from: 0, ifRange: nil)
        )
        #expect(
            ResumePlan.decide(offset: 500, validator: "\"t\"", resumesWithoutValidator: false)
                == .resume(from: 500, ifRange: "\"t\"")
        )
        #expect(
            ResumePlan.decide(offset: 500, validator: nil, resumesWithoutValidator: false) == .restart(.noValidator)
        )
        #expect(
            ResumePlan.decide(offset: 200_000, validator: nil, resumesWithoutValidator: true)
                == .verify(rangeStart: 200_000 - 65_536, offset: 200_000)
        )
        // A short partial: half of it is the overlap, so the request still asks for a range.
        #expect(
            ResumePlan.decide(offset: 1000, validator: nil, resumesWithoutValidator: true)
                == .verify(rangeStart: 500, offset: 1000)
        )
        #expect(ResumePlan.decide(offset: 1, validator: nil, resumesWithoutValidator: true) == .restart(.noValidator))
        #expect(
            ResumePlan.decide(offset: 100_000, validator: nil, resumesWithoutValidator: false, continuesRange: 200_000)
                == .verify(rangeStart: 50_000, offset: 100_000)
        )
        // After a capped answer of 30,000 bytes the overlap is a quarter of it, not half the partial.
        #expect(
            ResumePlan.decide(offset: 300_000, validator: nil, resumesWithoutValidator: false, continuesRange: 30_000)
                == .verify(rangeStart: 300_000 - 7_500, offset: 300_000)
        )
    }

    @Test("which validators are strong: a weak ETag is not; a Last-Modified only a minute before the Date")
    func strength() {
        var record = JournalRow(url: "http://h/a", destination: "/tmp/a")
        record.entityTag = "W/\"weak\""
        record.lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        #expect(record.ifRangeValidator == nil)
        record.lastModifiedIsStrong = true
        #expect(record.ifRangeValidator == "Sun, 06 Nov 1994 08:49:37 GMT")
        record.entityTag = "\"strong\""
        #expect(record.ifRangeValidator == "\"strong\"")
        #expect(HTTPDate.isStrong(lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", date: "Sun, 06 Nov 1994 08:50:37 GMT"))
        #expect(
            !HTTPDate.isStrong(lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", date: "Sun, 06 Nov 1994 08:50:36 GMT")
        )
        #expect(!HTTPDate.isStrong(lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", date: nil))
        #expect(!HTTPDate.isStrong(lastModified: "yesterday", date: "Sun, 06 Nov 1994 08:50:37 GMT"))
    }

    // MARK: against the fault server

    @Test(
        "no validator, a file replaced between attempts: the download starts over and ends with the new file, whole",
        arguments: ["plain-changing", "weak-changing", "dated-fresh-changing"]
    )
    func replacedFileIsNotSpliced(route: String) async throws {
        try await withFaultServer { server, directory in
            let path = "\(route)/150000/400000"
            let (events, result) = try await faults.fetch(
                path,
                from: server,
                into: directory,
                configuration: configuration(directory)
            )
            #expect(throws: Never.self) { try result.get() }
            // Version 1 ended after 150,000 bytes; version 2 came whole, from byte 0.
            #expect(
                try Data(contentsOf: directory.appendingPathComponent("out"))
                    == FaultServer.body(size: 400_000, version: 2)
            )
            let requests = server.requests(to: "/\(path)")
            #expect(requests.map(\.range) == [nil, nil])
            #expect(requests.map(\.status) == [200, 200])
            #expect(faults.restarts(in: events) == [.noValidator])
        }
    }

    @Test("the opt-in continues a partial whose overlap matches: only the overlap is sent twice")
    func optInResumesAfterTheOverlapMatches() async throws {
        try await withFaultServer { server, directory in
            let (events, result) = try await faults.fetch(
                "plain/150000/400000",
                from: server,
                into: directory,
                configuration: configuration(directory, unvalidated: true)
            )
            #expect(throws: Never.self) { try result.get() }
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 400_000))
            let requests = server.requests(to: "/plain/150000/400000")
            #expect(requests.map(\.range) == [nil, "bytes=\(150_000 - 65_536)-"])
            #expect(requests.map(\.ifRange) == [nil, nil])
            #expect(requests.map(\.status) == [200, 206])
            #expect(requests.last?.bytesSent == 400_000 - 150_000 + 65_536)
            #expect(faults.restarts(in: events).isEmpty)
        }
    }

    @Test("the opt-in sees a replaced file in the overlap and starts over; the file is the newest version, whole")
    func optInSeesAReplacedFile() async throws {
        try await withFaultServer { server, directory in
            let path = "plain-changing/150000/400000"
            let (events, result) = try await faults.fetch(
                path,
                from: server,
                into: directory,
                configuration: configuration(directory, unvalidated: true)
            )
            #expect(throws: Never.self) { try result.get() }
            let requests = server.requests(to: "/\(path)")
            // The overlap of version 2 differs from version 1's bytes: version 3 comes whole.
            #expect(requests.map(\.range) == [nil, "bytes=\(150_000 - 65_536)-", nil])
            #expect(
                try Data(contentsOf: directory.appendingPathComponent("out"))
                    == FaultServer.body(size: 400_000, version: 3)
            )
            #expect(faults.restarts(in: events) == [.overlapMismatch])
        }
    }

    @Test("a strong Last-Modified (long before the Date) resumes with If-Range: the date")
    func strongLastModifiedResumes() async throws {
        try await withFaultServer { server, directory in
            let (events, result) = try await faults.fetch(
                "dated/150000/400000",
                from: server,
                into: directory,
                configuration: configuration(directory)
            )
            #expect(throws: Never.self) { try result.get() }
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 400_000))
            let requests = server.requests(to: "/dated/150000/400000")
            #expect(requests.map(\.range) == [nil, "bytes=150000-"])
            #expect(requests.last?.ifRange?.hasSuffix(" GMT") == true)
            #expect(requests.map(\.status) == [200, 206])
            #expect(faults.restarts(in: events).isEmpty)
        }
    }

    @Test(
        "a chunked answer (no length) with a strong ETag, cut short, then whole again from a server ignoring Range: the same version, read past the bytes held"
    )
    func chunkedSameVersionRestarts() async throws {
        try await withFaultServer { server, directory in
            let (events, result) = try await faults.fetch(
                "chunked/100000/300000",
                from: server,
                into: directory,
                configuration: configuration(directory)
            )
            #expect(throws: Never.self) { try result.get() }
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 300_000))
            let requests = server.requests(to: "/chunked/100000/300000")
            // The resume's If-Range answered whole (asked again in its other forms first): each a 200.
            #expect(requests.count >= 2 && requests.allSatisfy { $0.status == 200 }, "\(requests.map(\.range))")
            #expect(faults.restarts(in: events).isEmpty)
        }
    }

    @Test(
        "decoding bodies, an interrupted download asks from the start again (ranges count encoded bytes, the partial holds decoded ones): the same version is read past the bytes held"
    )
    func decodedBodiesStartOver() async throws {
        try await withFaultServer { server, directory in
            var configuration = faults.configuration(directory)
            configuration.decodesCompression = true
            let (events, result) = try await faults.fetch(
                "stall/100000/300000",
                from: server,
                into: directory,
                configuration: configuration
            )
            #expect(throws: Never.self) { try result.get() }
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 300_000))
            #expect(server.requests(to: "/stall/100000/300000").map(\.range) == [nil, nil])
            #expect(faults.restarts(in: events).isEmpty)
        }
    }

    @Test(
        "a server that caps its answers and sends no validator: each next range is checked by an overlap within the cap, and the file ends whole",
        arguments: [30_000, 200_000]
    )
    func cappedWithoutValidator(cap: Int) async throws {
        try await withFaultServer { server, directory in
            let path = "capped-plain/\(cap)/600000"
            let (events, result) = try await faults.fetch(
                path,
                from: server,
                into: directory,
                configuration: configuration(directory)
            )
            #expect(throws: Never.self) { try result.get() }
            #expect(try Data(contentsOf: directory.appendingPathComponent("out")) == FaultServer.body(size: 600_000))
            #expect(faults.restarts(in: events).isEmpty)
            let requests = server.requests(to: "/\(path)")
            // Every answer after the first repeats at most a quarter of the one before.
            #expect(requests.dropFirst().allSatisfy { $0.status == 206 })
            #expect(requests.map(\.bytesSent).reduce(0, +) <= 600_000 + requests.count * cap / 4)
        }
    }
}
