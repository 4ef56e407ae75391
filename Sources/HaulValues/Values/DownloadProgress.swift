/// How far a download is, as the layers below report it (the facade's public `DownloadProgress`,
/// field for field, says what each means).
package struct DownloadProgress: Sendable, Hashable {
    package var bytesReceived: Int64
    package var totalBytes: Int64?
    package var bytesPerSecond: Double
    package var estimatedTimeRemaining: Duration?
    package var connections: Int

    /// Creates a progress value.
    package init(
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
    package var fractionCompleted: Double? {
        guard let totalBytes, totalBytes > 0 else { return totalBytes == 0 ? 1 : nil }
        return min(1, Double(bytesReceived) / Double(totalBytes))
    }
}
