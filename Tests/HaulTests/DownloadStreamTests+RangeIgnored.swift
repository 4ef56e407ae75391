import Foundation
import Testing

@testable import Haul

/// A stream resumed from a server that ignores `Range` and answers from byte 0 (a CDN, a dynamic
/// origin): bytes delivered cannot be taken back, but an answer proven to be the same file (its
/// pinned strong validator, or the overlap an unvalidated resume compares) goes on past them; a
/// changed file still ends the stream, never spliced.
extension DownloadStreamTests {
    @Test("a server that ignores Range after a drop, same strong ETag: the repeated bytes are dropped, the body whole")
    func streamThroughIgnoredRange() async throws {
        try await withFaultServer { server, directory in
            let path = "norange-drop/100000/400000"
            try await withDownloadManager(configuration: FaultTests().patient(directory)) { manager in
                let stream = try manager.stream(from: server.url(path))
                #expect(try await Self.collect(stream) == FaultServer.body(size: 400_000))
            }
            // Each resume asked from byte 100,000 (the If-Range in the next form first); the last
            // answer, from byte 0, was read past the bytes the reader had.
            let requests = server.requests(to: "/\(path)")
            #expect(requests.first?.range == nil && requests.count >= 2, "\(requests.map(\.range))")
            #expect(requests.dropFirst().allSatisfy { $0.range == "bytes=100000-" }, "\(requests.map(\.range))")
        }
    }

    @Test("no validator, resumes allowed, a server that ignores Range: the overlap is checked inside the repeated body")
    func unvalidatedStreamThroughIgnoredRange() async throws {
        try await withFaultServer { server, directory in
            let path = "plain-norange-drop/100000/400000"
            try await withDownloadManager(configuration: unvalidated(directory)) { manager in
                let stream = try manager.stream(from: server.url(path))
                #expect(try await Self.collect(stream) == FaultServer.body(size: 400_000))
            }
            let requests = server.requests(to: "/\(path)")
            #expect(requests.map(\.range) == [nil, "bytes=50000-"], "\(requests.map(\.range))")
        }
    }

    @Test(
        "a server that ignores Range and changed the file: the stream throws, what was read is a prefix",
        arguments: [("changing-norange/100000/300000", false), ("plain-norange-changing/100000/300000", true)]
    )
    func changedFileThroughIgnoredRange(path: String, unvalidated plain: Bool) async throws {
        try await withFaultServer { server, directory in
            let configuration = plain ? unvalidated(directory) : FaultTests().patient(directory)
            try await withDownloadManager(configuration: configuration) { manager in
                let stream = try manager.stream(from: server.url(path))
                var body = Data()
                await #expect {
                    for try await chunk in stream { body.append(contentsOf: chunk) }
                } throws: { error in
                    let reason = plain ? RestartReason.overlapMismatch : .remoteChanged
                    return (error as? DownloadError)?.code == .streamCannotRestart && "\(error)".contains("\(reason)")
                }
                #expect(body == FaultServer.body(size: 300_000, version: 1).prefix(100_000))
            }
        }
    }
}

extension DownloadStreamTests {
    @Test("decoding bodies, a stream stalled mid-body: asked for from its start again, read past what the reader has")
    func decodedStreamThroughStall() async throws {
        try await withFaultServer { server, directory in
            var configuration = FaultTests().configuration(directory)
            configuration.decodesCompression = true
            try await withDownloadManager(configuration: configuration) { manager in
                let stream = try manager.stream(from: server.url("stall/100000/300000"))
                #expect(try await Self.collect(stream) == FaultServer.body(size: 300_000))
            }
            // A decoded body's offsets are not the server's: no range, the whole body again.
            #expect(server.requests(to: "/stall/100000/300000").map(\.range) == [nil, nil])
        }
    }

    @Test(
        "decoding bodies, the file changed when a stream is asked for from its start again: it throws, naming the change"
    )
    func decodedStreamChanged() async throws {
        try await withFaultServer { server, directory in
            var configuration = FaultTests().patient(directory)
            configuration.decodesCompression = true
            try await withDownloadManager(configuration: configuration) { manager in
                let stream = try manager.stream(from: server.url("changing/100000/300000"))
                var body = Data()
                await #expect {
                    for try await chunk in stream { body.append(contentsOf: chunk) }
                } throws: { error in
                    (error as? DownloadError)?.code == .streamCannotRestart
                        && "\(error)".contains(RestartReason.remoteChanged.description)
                }
                #expect(body == FaultServer.body(size: 300_000, version: 1).prefix(100_000))
            }
        }
    }
}
