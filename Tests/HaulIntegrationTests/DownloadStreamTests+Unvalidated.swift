import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// Streams, bodies in memory and discarded bodies from a server that gives no validator (no ETag,
/// no Last-Modified): a stream cannot be read back or taken back, so it keeps its last bytes to
/// check a resume with (``DownloadManager/Configuration/resumesWithoutValidator``), and fails at
/// once, saying so, where it would have to start over.
extension DownloadStreamTests {
    func unvalidated(_ directory: URL) -> DownloadManager.Configuration {
        var configuration = FaultTests().patient(directory)
        configuration.resumesWithoutValidator = true
        return configuration
    }

    @Test("no validator, a drop every 100 KB, resumes without one allowed: the stream is whole, each resume checked")
    func streamWithoutValidator() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: unvalidated(directory)) { manager in
                let stream = try manager.stream(from: server.url("plain-drop/100000/400000"))
                #expect(try await Self.collect(stream) == FaultServer.body(size: 400_000))
            }
            // Each resume asks again for bytes before its point (half the first 100 KB, then 64 KiB)
            // and sends no If-Range: there is nothing to pin.
            let requests = server.requests(to: "/plain-drop/100000/400000")
            let starts = requests.dropFirst().compactMap { $0.range.flatMap { Int64($0.dropFirst(6).dropLast()) } }
            #expect(requests.first?.range == nil && starts.first == 50_000, "\(requests.map(\.range))")
            #expect(starts.count == requests.count - 1 && requests.allSatisfy { $0.ifRange == nil })
            var end: Int64 = 100_000
            for start in starts {
                #expect(start == end - min(64 * 1024, end / 2), "\(requests.map(\.range))")
                end = start + 100_000
            }
        }
    }

    @Test("no validator, a server that caps each answer at 150 KB: the stream checks each next range, no opt-in needed")
    func streamFromCappingServer() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: FaultTests().patient(directory)) { manager in
                let stream = try manager.stream(from: server.url("capped-plain/150000/500000"))
                #expect(try await Self.collect(stream) == FaultServer.body(size: 500_000))
            }
            #expect(server.requests(to: "/capped-plain/150000/500000").count >= 4)
        }
    }

    @Test("no validator and no opt-in: the stream fails at the drop, before asking again, and names the option")
    func streamWithoutValidatorFails() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: FaultTests().patient(directory)) { manager in
                let stream = try manager.stream(from: server.url("plain-drop/100000/400000"))
                var body = Data()
                var thrown: DownloadError?
                do {
                    for try await chunk in stream { body.append(contentsOf: chunk) }
                } catch let error as DownloadError {
                    thrown = error
                }
                let error = try #require(thrown)
                #expect(
                    error.code == .streamCannotRestart
                        && error.url == server.url("plain-drop/100000/400000").absoluteString
                )
                #expect(error.description.contains("resumesWithoutValidator"), "\(error)")
                #expect(error.description(naming: { "«\($0)»" }).contains("Turn on «resumesWithoutValidator»"))
                #expect(body == FaultServer.body(size: 400_000).prefix(100_000))
            }
            #expect(server.requests(to: "/plain-drop/100000/400000").count == 1)
        }
    }

    @Test("no validator, resumes allowed, the file changed under the resume: the stream throws, never a splice")
    func streamWithoutValidatorChanged() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: unvalidated(directory)) { manager in
                let stream = try manager.stream(from: server.url("plain-changing/100000/300000"))
                var body = Data()
                await #expect {
                    for try await chunk in stream { body.append(contentsOf: chunk) }
                } throws: {
                    ($0 as? DownloadError)?.code == .streamCannotRestart
                        && "\($0)".contains(RestartReason.overlapMismatch.description)
                }
                #expect(body == FaultServer.body(size: 300_000, version: 1).prefix(100_000))
            }
        }
    }

    @Test(
        "no validator, resumes allowed: a body in memory is checked against what it holds; a discarded one counts again"
    )
    func memoryAndDiscardWithoutValidator() async throws {
        try await withFaultServer { server, directory in
            try await withDownloadManager(configuration: unvalidated(directory)) { manager in
                let body = try await manager.data(from: server.url("plain-drop/100000/400000"), maximumSize: 1_000_000)
                #expect(body.data == FaultServer.body(size: 400_000))
                // A discarded body keeps nothing to check: it is read again from its start.
                let discarded = try manager.discard(from: server.url("plain/100000/400000"))
                var restarts: [RestartReason] = []
                for await event in discarded.events {
                    if case .restarted(let reason) = event { restarts.append(reason) }
                }
                _ = try await discarded.finished()
                #expect(restarts == [.noValidator])
                #expect(discarded.progress.bytesReceived == 400_000)
            }
            #expect(server.requests(to: "/plain-drop/100000/400000").count > 2)
            #expect(server.requests(to: "/plain/100000/400000").map(\.range) == [nil, nil])
        }
    }

    @Test("a stream's tail: the last 64 KiB accepted are kept once asked for, whatever the chunks' sizes")
    func streamTail() throws {
        let descriptor = open("/dev/null", O_WRONLY | O_CLOEXEC)
        try #require(descriptor >= 0)
        let target = StreamTarget(descriptor: descriptor, kind: "character device", path: "/dev/null")
        let data = FaultServer.body(size: 300_000)
        var offset = 0
        func write(_ count: Int) throws {
            try data[offset..<(offset + count)].withUnsafeBytes { try target.write($0) }
            offset += count
        }
        try write(1_000)
        #expect(target.acceptedBytes(from: 0) == nil)  // not kept before it was asked for
        target.keepTail(64 * 1024)
        for count in [10, 70_000, 3, 140_000, 17, 8_000] { try write(count) }
        let limit = target.tailLimit
        #expect(target.accepted == Int64(offset))
        #expect(target.acceptedBytes(from: Int64(offset - limit)) == Array(data[(offset - limit)..<offset]))
        #expect(target.acceptedBytes(from: Int64(offset - 5)) == Array(data[(offset - 5)..<offset]))
        #expect(target.acceptedBytes(from: Int64(offset)) == [])
        #expect(target.acceptedBytes(from: Int64(offset + 1)) == nil)
        #expect(target.acceptedBytes(from: Int64(offset - 3 * limit)) == nil)
    }
}
