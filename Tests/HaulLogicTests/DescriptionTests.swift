import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulValues

/// Issue 58, item 4: the values a caller prints read as a person reads them.
@Suite("Descriptions")
struct DescriptionTests {
    @Test("progress: the bytes, the total, the rate and the time left, in binary units; what is unknown is left out")
    func progress() {
        let running = DownloadProgress(
            bytesReceived: 4 << 20,
            totalBytes: 32 << 20,
            bytesPerSecond: 12 * 1024 * 1024,
            estimatedTimeRemaining: .seconds(3)
        )
        #expect(running.description == "4.0 MiB of 32.0 MiB, 12.0 MiB/s, 3 s left")
        #expect("\(DownloadProgress(bytesReceived: 1536, totalBytes: nil))" == "1.5 KiB")
        #expect(DownloadProgress(bytesReceived: 0, totalBytes: 100).description == "0 bytes of 100 bytes")
        let split = DownloadProgress(
            bytesReceived: 5 << 30,
            totalBytes: 8 << 30,
            bytesPerSecond: 100,
            estimatedTimeRemaining: .seconds(3725),
            connections: 4
        )
        #expect(split.description == "5.0 GiB of 8.0 GiB, 100 bytes/s, 1 h 2 min left, 4 connections")
    }

    @Test("states and events: their name and what they carry")
    func statesAndEvents() {
        let file = URL(fileURLWithPath: "/data/big.iso")
        let error = DownloadError(code: .httpStatus, url: "https://example.com/big.iso", httpStatus: 404)
        #expect(DownloadState.receiving.description == "receiving")
        #expect(DownloadState.completed(file).description == "completed: /data/big.iso")
        #expect(DownloadState.failed(error).description == "failed: \(error)")
        #expect(
            DownloadState.waitingToRetry(error, after: .milliseconds(1500)).description
                == "waiting 1.50 s to retry after: \(error)"
        )
        let progress = DownloadProgress(bytesReceived: 2048, totalBytes: 4096)
        #expect(DownloadEvent.progress(progress).description == "progress: 2.0 KiB of 4.0 KiB")
        #expect(DownloadEvent.paused(progress).description == "paused at 2.0 KiB of 4.0 KiB")
        #expect(DownloadEvent.restarted(.remoteChanged).description == "restarted: the remote file changed")
        #expect(DownloadEvent.cancelled.description == "cancelled")
        // A URL is shown without its user name and password.
        let mirror = URL(string: "https://user:s3cret@mirror.example/big.iso")!
        let switched = DownloadEvent.switchedURL(mirror, after: error).description
        #expect(switched.hasPrefix("switched to https://mirror.example/big.iso after: "))
        #expect(!switched.contains("s3cret"))
    }

    @Test("timings and a response: durations in the unit that suits them, counts in words")
    func timingsAndResponse() {
        let timings = DownloadTimings(
            queued: .microseconds(850),
            timeToFirstByte: .milliseconds(14),
            total: .milliseconds(1250),
            bytes: 32 << 20,
            attempts: 2,
            connectionsOpened: 1,
            connectionsReused: 1
        )
        #expect(
            timings.description
                == "queued 850 µs, first byte after 14 ms, total 1.25 s; 32.0 MiB in 2 requests, 1 connection opened, 1 reused"
        )
        #expect(DownloadTimings().description == "0 bytes in 0 requests, 0 connections opened, 0 reused")
        let response = DownloadResponse(
            url: URL(string: "https://example.com/big.iso")!,
            status: 206,
            contentType: "application/octet-stream",
            entityTag: "\"abc\"",
            lastModified: nil,
            totalBytes: 32 << 20
        )
        #expect(
            response.description
                == "206 from https://example.com/big.iso, application/octet-stream, 32.0 MiB, ETag \"abc\""
        )
        // Its headers: found without case; a cookie the server sets is kept, never printed.
        var withHeaders = response
        withHeaders.headers = [DownloadHeader("Content-Type", "text/csv"), DownloadHeader("Set-Cookie", "sid=s3cret")]
        #expect(withHeaders.value(forHeader: "content-type") == "text/csv")
        #expect(withHeaders.value(forHeader: "set-cookie") == "sid=s3cret")
        #expect(withHeaders.value(forHeader: "ETag") == nil)
        #expect(withHeaders.headers[1].isSensitive && !"\(withHeaders.headers)".contains("s3cret"))
    }

    @Test("packed headers: made when read, in order, empty values kept, secrets marked; equal to the same headers made")
    func packedHeaders() {
        var packed = PackedHeaders()
        #expect(packed.isEmpty)
        let pairs = [("Content-Type", "text/csv"), ("X-Empty", ""), ("Set-Cookie", "sid=s3cret"), ("X-Note", "café")]
        for (name, value) in pairs {
            name.withCString { name in value.withCString { value in packed.append(name: name, value: value) } }
        }
        #expect(!packed.isEmpty)
        let url = URL(string: "https://example.com/a.csv")!
        let response = DownloadResponse(
            ResponseRecord(
                url: url,
                status: 200,
                contentType: "text/csv",
                entityTag: nil,
                lastModified: nil,
                totalBytes: 3,
                packedHeaders: packed
            )
        )
        #expect(response.headers.map(\.name) == pairs.map(\.0))
        #expect(response.headers.map(\.value) == pairs.map(\.1))
        #expect(response.value(forHeader: "x-empty") == "" && response.value(forHeader: "x-note") == "café")
        #expect(response.headers[2].isSensitive && !"\(response.headers)".contains("s3cret"))
        var made = DownloadResponse(url: url, status: 200, contentType: "text/csv", totalBytes: 3)
        made.headers = pairs.map { DownloadHeader($0.0, $0.1) }
        #expect(made == response && made.hashValue == response.hashValue)
        made.headers.removeLast()
        #expect(made != response)
        // Nothing packed: no headers, as for a file.
        let none = DownloadResponse(
            ResponseRecord(
                url: url,
                status: 200,
                contentType: nil,
                entityTag: nil,
                lastModified: nil,
                totalBytes: nil,
                packedHeaders: PackedHeaders()
            )
        )
        #expect(none.headers.isEmpty && none == DownloadResponse(url: url, status: 200))
    }

    @Test("sensitive by name: whole names and words in any case, not others; a non-ASCII name lowered as Unicode")
    func sensitiveNames() {
        for name in [
            "Authorization", "COOKIE", "set-cookie", "Proxy-Authorization", "X-Api-Key", "x-auth-token",
            "X-Amz-Security-Token", "Client-Secret", "X-Session-Id", "X-Signature", "PASSWORD", "authx", "\u{212A}ey",
        ] {
            #expect(DownloadHeader(name, "v").isSensitive, "\(name)")
        }
        for name in ["Accept", "Content-Type", "ETag", "X-Tenant", "Cook", "ke", "", "X-Ke-y", "Caf\u{E9}"] {
            #expect(!DownloadHeader(name, "v").isSensitive, "\(name)")
        }
        #expect(DownloadHeader("X-Tenant", "v", sensitive: true).isSensitive)
    }
}
