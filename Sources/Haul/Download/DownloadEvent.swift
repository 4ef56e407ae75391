import FoundationEssentials

/// Identifies a download: derived from its URL and destination, so the same pair always maps to the
/// same partial file and the same id, in this process and the next.
public struct DownloadID: Hashable, Sendable, CustomStringConvertible {
    /// 32 hexadecimal digits.
    public let rawValue: String

    /// Wraps an id printed earlier.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// The id of the download of `url` to `destination` (as ``DownloadManager`` derives it).
    public init(url: URL, destination: URL) {
        self.init(url: url.absoluteString, destinationPath: DownloadManager.standardizedPath(of: destination))
    }

    /// The id of the download of `url` to `destination`.
    init(url: String, destinationPath: String) {
        let key = Array("\(url)\n\(destinationPath)".utf8)
        // Two independent 64-bit FNV-1a hashes: a stable, dependency-free 128-bit key (not a security hash).
        func fnv1a(_ bytes: [UInt8], basis: UInt64) -> UInt64 {
            var hash = basis
            for byte in bytes {
                hash ^= UInt64(byte)
                hash &*= 0x100_0000_01b3
            }
            return hash
        }
        let high = fnv1a(key, basis: 0xcbf2_9ce4_8422_2325)
        let low = fnv1a(key.reversed(), basis: 0x8422_2325_cbf2_9ce4)
        func hex(_ value: UInt64) -> String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }
        self.rawValue = hex(high) + hex(low)
    }

    /// The raw value.
    public var description: String { rawValue }
}

/// How far a download is: bytes written to the partial file (handed to the kernel), the expected
/// total when known, the current speed and the estimated time left.
public struct DownloadProgress: Sendable, Hashable {
    /// Bytes of the file written so far, including bytes kept from earlier attempts.
    public var bytesReceived: Int64
    /// The file's length, when the server announced it.
    public var totalBytes: Int64?
    /// The recent transfer rate, in bytes per second (0 until measured).
    public var bytesPerSecond: Double
    /// The estimated time left, when the total and a speed are known.
    public var estimatedTimeRemaining: Duration?

    /// Creates a progress value.
    public init(
        bytesReceived: Int64,
        totalBytes: Int64?,
        bytesPerSecond: Double = 0,
        estimatedTimeRemaining: Duration? = nil
    ) {
        self.bytesReceived = bytesReceived
        self.totalBytes = totalBytes
        self.bytesPerSecond = bytesPerSecond
        self.estimatedTimeRemaining = estimatedTimeRemaining
    }

    /// `bytesReceived / totalBytes` in 0...1, when the total is known.
    public var fractionCompleted: Double? {
        guard let totalBytes, totalBytes > 0 else { return totalBytes == 0 ? 1 : nil }
        return min(1, Double(bytesReceived) / Double(totalBytes))
    }
}

/// Where a download is in its life. `completed`, `failed` and `cancelled` are final.
public enum DownloadState: Sendable, Hashable {
    /// Waiting for a free slot.
    case idle
    /// A request is out; no response accepted yet.
    case connecting
    /// Body bytes are being written to the partial file.
    case receiving
    /// Stopped by the user (or a shutdown); the partial file is kept.
    case paused
    /// The file is at its destination.
    case completed(URL)
    /// The download failed; the partial file is kept where resuming can use it.
    case failed(DownloadError)
    /// The user cancelled; the partial file was deleted.
    case cancelled

    /// Whether this state is final.
    public var isFinal: Bool {
        switch self {
        case .completed, .failed, .cancelled: true
        default: false
        }
    }
}

/// What a download's ``Download/events`` sequence yields.
///
/// A new iteration starts with the download's current state, then follows every change. Progress is
/// coalesced: at most one `.progress` per ``DownloadManager/Configuration/progressInterval``, and a
/// consumer that falls behind sees the newest progress rather than a backlog. The final event
/// (`.completed`, `.failed` or `.cancelled`) is never dropped; the sequence ends after it, or after
/// `.paused` when the manager shuts down.
public enum DownloadEvent: Sendable, Hashable {
    /// Waiting for a free slot.
    case queued
    /// A request is out, for the bytes after `progress.bytesReceived`.
    case connecting(DownloadProgress)
    /// The server's answer was accepted; body bytes follow.
    case receiving(DownloadProgress)
    /// More bytes were written.
    case progress(DownloadProgress)
    /// The partial file was thrown away and the download starts again from zero, for this reason.
    case restarted(RestartReason)
    /// The attempt failed transiently (the error says how); the download is queued again and may
    /// start after this delay, from the bytes on disk.
    case retrying(DownloadError, after: Duration)
    /// Paused; the partial file holds `progress.bytesReceived` bytes.
    case paused(DownloadProgress)
    /// Finished: the whole file is at this path.
    case completed(URL)
    /// Failed with this error.
    case failed(DownloadError)
    /// Cancelled; the partial file was deleted.
    case cancelled

    /// Whether this is the last event of a download.
    public var isFinal: Bool {
        switch self {
        case .completed, .failed, .cancelled: true
        default: false
        }
    }
}
