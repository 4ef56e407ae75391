@testable import Haul

extension DownloadManager.Configuration {
    /// What most integration tests run with: 64 KiB buffers, and progress every 20 ms so that a
    /// test waiting for some progress sees it soon.
    static func forTests(bufferSize: Int = 64 * 1024) -> Self {
        var configuration = Self()
        configuration.bufferSize = bufferSize
        configuration.progressInterval = .milliseconds(20)
        return configuration
    }
}
