import CHaul
import FoundationEssentials
import Glibc
import HaulIO
import HaulValues

extension DownloadManager {
    /// Streams the body of `url`: its bytes in order as they arrive, never on disk, resuming after
    /// a dropped connection or a stall from the next byte not read yet (see ``DownloadStream``).
    ///
    /// A stream takes a slot like a download and follows the same limits (per host, rates); its row
    /// lives for this process only.
    ///
    /// - Parameters:
    ///   - url: an http(s) URL.
    ///   - headers: sent with every request of it, over the manager's.
    ///   - bufferLimit: how far the body may run ahead of its reader, in bytes (the kernel rounds it
    ///     up to pages, and caps it at `/proc/sys/fs/pipe-max-size`, 1 MiB by default); the transfer
    ///     waits while it is full.
    /// - Throws: ``DownloadError`` when the URL or a header is refused, or no pipe can be made.
    public func stream(
        from url: URL,
        headers: [DownloadHeader] = [],
        bufferLimit: Int = 256 * 1024
    ) throws -> DownloadStream {
        var ends: [Int32] = [-1, -1]
        // Close-on-exec from the start: a child another thread spawns meanwhile would otherwise
        // keep a copy of the write end, and the reader would never see the body's end.
        guard CHaul_pipe(&ends) == 0 else {
            throw DownloadError(
                code: .fileSystem,
                url: url.redactedString,
                errno: errno,
                detail: "could not make a pipe"
            )
        }
        _ = fcntl(ends[1], Self.setPipeSize, Int32(clamping: max(4096, bufferLimit)))
        var request = DownloadRequest(url: url, destination: URL(fileURLWithPath: "/proc/self/fd/\(ends[1])"))
        request.headers = headers
        // Not the id of its path: the next stream may be given this descriptor's number as soon as
        // this one's is closed, before this download's row and handle are gone.
        request.giveUniqueID()
        do {
            let download = try download(request)
            return DownloadStream(body: StreamBody(download: download, readEnd: ends[0], writeEnd: ends[1]))
        } catch {
            close(ends[0])
            close(ends[1])
            throw error
        }
    }

    /// `F_SETPIPE_SZ` (Linux's value; Glibc shows it to `_GNU_SOURCE` only).
    private static let setPipeSize: Int32 = 1031
}

extension DownloadManager {
    /// The body of `url` in memory with its response and timings, fetched as any download is (a
    /// slot, the manager's limits, retries; resumed after drops and stalls with `Range` and
    /// `If-Range`, never spliced: a body the server sends from its start again is collected again
    /// from its start).
    ///
    /// - Parameters:
    ///   - url: an http(s) URL.
    ///   - headers: sent with every request of it, over the manager's.
    ///   - maximumSize: the most bytes accepted: a `Content-Length` above it fails before the body,
    ///     a body without one at the first chunk past it (the error names this argument).
    /// - Returns: the bytes, the response they came with (status, every header, final URL, type,
    ///   length, validators) and what they cost (``DownloadTimings``).
    /// - Throws: ``DownloadError`` (`.fileTooLarge` past `maximumSize`, or the download's own), or
    ///   `CancellationError` when the calling task is cancelled (the download is cancelled too).
    public func data(
        from url: URL,
        headers: [DownloadHeader] = [],
        maximumSize: Int
    ) async throws -> DownloadedData {
        let collector = BodyCollector(maximum: Int64(max(0, maximumSize)))
        let download = try download(.collecting(url, headers: headers, into: collector))
        try await withTaskCancellationHandler {
            _ = try await download.finished()
        } onCancel: {
            download.cancel()
        }
        return DownloadedData(
            data: collector.take(),
            response: DownloadResponse(download.live.acceptedResponse),
            timings: download.timings
        )
    }
}

extension DownloadManager {
    /// Fetches `url` and throws its body away, counting it: a load test's download
    /// (``DownloadRequest/discarding(_:headers:)``). Its ``Download/timings`` tell what it cost once it
    /// ended; ``Download/finished()`` returns `/dev/null`.
    ///
    /// - Parameters:
    ///   - url: an http(s) URL.
    ///   - headers: sent with its requests, over the manager's.
    /// - Throws: ``DownloadError`` when the URL or a header is refused.
    public func discard(from url: URL, headers: [DownloadHeader] = []) throws -> Download {
        try download(.discarding(url, headers: headers))
    }
}
