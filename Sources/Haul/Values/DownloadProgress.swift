import HaulValues

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
    /// How many connections fetch the file now: 1 for most downloads, up to
    /// ``DownloadManager/Configuration/connectionsPerFile`` for one split into segments (0 when
    /// none is open: queued, paused, or between requests).
    public var connections: Int

    /// Creates a progress value.
    public init(
        bytesReceived: Int64,
        totalBytes: Int64?,
        bytesPerSecond: Double = 0,
        estimatedTimeRemaining: Duration? = nil,
        connections: Int = 0
    ) {
        self.bytesReceived = bytesReceived
        self.totalBytes = totalBytes
        self.bytesPerSecond = bytesPerSecond
        self.estimatedTimeRemaining = estimatedTimeRemaining
        self.connections = connections
    }

    /// `bytesReceived / totalBytes` in 0...1, when the total is known.
    public var fractionCompleted: Double? { engine.fractionCompleted }
}

extension DownloadProgress: CustomStringConvertible {
    /// "4.0 MiB of 32.0 MiB, 12.0 MiB/s, 3 s left" (the parts not known yet are left out; a
    /// download over several connections says how many).
    public var description: String { engine.description }
}

extension DownloadProgress {
    /// The progress as the layers below report it.
    init(_ progress: HaulValues.DownloadProgress) {
        self.init(
            bytesReceived: progress.bytesReceived,
            totalBytes: progress.totalBytes,
            bytesPerSecond: progress.bytesPerSecond,
            estimatedTimeRemaining: progress.estimatedTimeRemaining,
            connections: progress.connections
        )
    }

    /// The progress as the layers below know it.
    var engine: HaulValues.DownloadProgress {
        HaulValues.DownloadProgress(
            bytesReceived: bytesReceived,
            totalBytes: totalBytes,
            bytesPerSecond: bytesPerSecond,
            estimatedTimeRemaining: estimatedTimeRemaining,
            connections: connections
        )
    }
}
