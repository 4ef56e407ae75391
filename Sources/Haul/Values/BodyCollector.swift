import Synchronization

/// A body asked for in memory (``DownloadManager/data(from:headers:maximumSize:)``): filled on the
/// loop thread as it arrives (``StreamTarget``), emptied when the server sends it from its start
/// again, taken whole by the caller once the download completed.
final class BodyCollector: Sendable {
    /// The most bytes accepted: a longer body fails the download (`.fileTooLarge`).
    let maximum: Int64
    private let bytes = Mutex<[UInt8]>([])

    init(maximum: Int64) {
        self.maximum = maximum
    }

    func append(_ chunk: UnsafeRawBufferPointer) {
        bytes.withLock { $0.append(contentsOf: chunk) }
    }

    /// The body starts again from its first byte.
    func reset() {
        bytes.withLock { $0.removeAll(keepingCapacity: true) }
    }

    /// The body, which the collector no longer holds.
    func take() -> [UInt8] {
        bytes.withLock { body in
            defer { body = [] }
            return body
        }
    }
}
