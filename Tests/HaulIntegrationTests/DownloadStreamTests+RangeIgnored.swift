import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

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
            // The resume asked from byte 100,000 with If-Range, then (ignored) without it from
            // 50,000 (the overlap the kept tail checks: half the bytes held); the last answer, from
            // byte 0, was read past the bytes the reader had.
            let requests = server.requests(to: "/\(path)")
            #expect(requests.first?.range == nil && requests.count >= 2, "\(requests.map(\.range))")
            #expect(requests.dropFirst().first?.range == "bytes=100000-", "\(requests.map(\.range))")
            #expect(
                requests.dropFirst(2).allSatisfy { $0.range == "bytes=50000-" },
                "\(requests.map(\.range))"
            )
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
    @Test("one ETag over other bytes: the stream throws at the first difference in the bytes it kept, never spliced")
    func sameTagOtherBytesThroughStream() async throws {
        try await withFaultServer { server, directory in
            let path = "sametag/3/100000/400000"
            try await withDownloadManager(configuration: FaultTests().patient(directory)) { manager in
                let stream = try manager.stream(from: server.url(path))
                var body = Data()
                await #expect {
                    for try await chunk in stream { body.append(contentsOf: chunk) }
                } throws: { error in
                    (error as? DownloadError)?.code == .streamCannotRestart
                        && "\(error)".contains(RestartReason.overlapMismatch.description)
                }
                // Before: version 1's first 100,000 bytes, then version 2's from there on.
                #expect(body == FaultServer.body(size: 400_000, version: 1).prefix(100_000))
            }
            // The If-Range answered whole is asked again without it, from 50,000 (the
            // overlap); that answer is read past the reader's bytes until the kept tail's first
            // byte that differs.
            let requests = server.requests(to: "/\(path)")
            #expect(requests.map(\.range) == [nil, "bytes=100000-", "bytes=50000-"])
            #expect(requests.map(\.ifRange) == [nil, "\"same\"", nil])
        }
    }

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

extension DownloadStreamTests {
    @Test("nginx with max_ranges 0, a FIFO paused and resumed: its 200 read past what the reader has, the body whole")
    func fifoFromNginxIgnoringRanges() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("ignored.bin", size: 2 * 1024 * 1024, seed: 421)
        let (fifo, reader) = try DestinationTests.fifoWithReader(in: directory)
        try await withDownloadManager(configuration: DownloadManager.Configuration()) { manager in
            // /gated-norange/: 1 MiB at once, then 1 KB/s; a request with a Range is answered whole.
            let download = try manager.download(
                from: server.url("gated-norange/ignored.bin"),
                to: URL(fileURLWithPath: fifo)
            )
            var events = download.events.makeAsyncIterator()
            await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 256 * 1024 } else { false } }
            await download.pause()
            await events.next { if case .paused = $0 { true } else { false } }
            await download.resume()
            #expect(try await download.finished().path == fifo)
        }
        #expect(await reader.everything() == source)
        let requests = await server.requests(to: "/gated-norange/ignored.bin", atLeast: 2)
        #expect(requests.map(\.status) == [200, 200], "\(requests.map(\.range))")
        #expect(requests.last?.range.hasPrefix("bytes=") == true)
    }
}
