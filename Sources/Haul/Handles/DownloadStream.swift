import FoundationEssentials
import Glibc
import HaulIO
import HaulValues

/// A download's body as it arrives, in order, never on disk (``DownloadManager/stream(from:headers:bufferLimit:)``):
/// an `AsyncSequence` of chunks that ends when the body is whole, or throws the download's error.
///
/// The body goes through a pipe of this process: the loop writes what arrives and, when the reader
/// is behind (the pipe holds `bufferLimit` bytes), holds the transfer paused until it catches up, so
/// memory stays bounded whatever the reader's pace. A dropped connection, a stall or a retryable
/// status continues from the next byte the reader has not been given (`Range` with `If-Range`): the
/// reader sees one uninterrupted sequence. A server that answers a resume with another version ends
/// the sequence with an error (what was given cannot be taken back), never with a splice. The
/// response (``response()``: status, headers, final URL, length, type, validators) can be awaited
/// before the first chunk is read. Leaving the sequence early (a `break`, a cancelled task) cancels
/// the download and frees its slot.
///
/// ```swift
/// let stream = try manager.stream(from: url)
/// let response = try await stream.response()
/// guard response.value(forHeader: "Content-Type") == "text/csv" else { return }
/// for try await chunk in stream { parser.feed(chunk) }
/// ```
public struct DownloadStream: AsyncSequence, Sendable {
    /// A chunk of the body: the bytes one read of the pipe found, at most 64 KiB.
    public typealias Element = [UInt8]

    /// The download that fills the stream: its state, events, response and progress.
    public var download: Download { body.download }

    let body: StreamBody

    init(body: StreamBody) {
        self.body = body
    }

    /// The response the body comes from, as soon as its head was accepted (with the body's first
    /// bytes: the head is judged with them), without reading a chunk. For a body resumed after a
    /// drop, the answer that continues it (a 206) once it was accepted.
    ///
    /// - Throws: the download's ``DownloadError`` when it ended without a response (a refused
    ///   connection, a 404), or `CancellationError` when the calling task is cancelled (the stream
    ///   goes on).
    public func response() async throws -> DownloadResponse {
        let download = body.download
        // Each iteration starts with the current state: a response recorded before it is seen at
        // the first event, and a later one comes with its own (receiving, progress, an end).
        for await _ in download.events {
            if let response = download.response { return response }
            try Task.checkCancellation()
        }
        try Task.checkCancellation()
        if let response = download.response { return response }
        _ = try await download.finished()  // its error
        return DownloadResponse(download.live.acceptedResponse)
    }

    /// An iterator over the body; several share one body (each chunk goes to one of them).
    public func makeAsyncIterator() -> Iterator { Iterator(body: body) }

    /// Reads the body a chunk at a time.
    public struct Iterator: AsyncIteratorProtocol {
        let body: StreamBody

        /// The next chunk (at most 64 KiB), or `nil` once the body is whole.
        ///
        /// - Throws: the download's ``DownloadError`` when it failed or was cancelled, or
        ///   `CancellationError` when the reading task was cancelled (the download is cancelled too).
        public mutating func next() async throws -> [UInt8]? { try await body.next() }
    }
}

/// The reading end of a ``DownloadStream``'s pipe, shared by its iterators; the download is
/// cancelled and the pipe closed when the last reference goes.
final class StreamBody: Sendable {
    static let chunkSize = 64 * 1024

    let download: Download
    private let readEnd: Int32
    /// The pipe's end this process named as the destination: open until the download ended (so
    /// that its number names no other stream meanwhile), then closed, which ends the reader's input.
    private let writeEnd: Int32

    init(download: Download, readEnd: Int32, writeEnd: Int32) {
        self.download = download
        self.readEnd = readEnd
        self.writeEnd = writeEnd
        Task { [download, writeEnd] in
            _ = try? await download.finished()
            Glibc.close(writeEnd)
        }
    }

    deinit {
        let (download, readEnd) = (download, readEnd)
        guard !download.state.isFinal else {
            Glibc.close(readEnd)
            return
        }
        download.cancel()
        // Open until the loop carried out the cancellation: a write meanwhile finds the pipe full
        // (the transfer waits), not closed (a failure, "the reader went away", not `cancelled`).
        Task {
            _ = try? await download.finished()
            Glibc.close(readEnd)
        }
    }

    func next() async throws -> [UInt8]? {
        while true {
            do {
                try Task.checkCancellation()
            } catch {
                download.live.submit(.cancel)  // not awaited: the reader's task is done with it
                throw error
            }
            var chunk = [UInt8](repeating: 0, count: Self.chunkSize)
            let count = chunk.withUnsafeMutableBytes { Glibc.read(readEnd, $0.baseAddress, Self.chunkSize) }
            if count > 0 {
                chunk.removeLast(Self.chunkSize - count)
                return chunk
            }
            if count == 0 {
                // Every writer is gone: the download ended. Its outcome says whether the body is whole.
                _ = try await download.finished()
                return nil
            }
            switch errno {
            case EINTR: continue
            case EAGAIN: await PipeReadiness.shared.waitUntilReadable(readEnd)
            default:
                throw DownloadError(
                    code: .fileSystem,
                    url: download.url.redactedString,
                    errno: errno,
                    path: nil,
                    detail: "reading the stream's pipe failed"
                )
            }
        }
    }
}
