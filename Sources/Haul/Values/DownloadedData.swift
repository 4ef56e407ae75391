import FoundationEssentials

/// A body fetched into memory with the response it came with and what it cost
/// (``DownloadManager/data(from:headers:maximumSize:)``): what `URLSession.data(from:)` and
/// AsyncHTTPClient's response give, in one value.
///
/// ```swift
/// let fetched = try await manager.data(from: url, maximumSize: 1 << 20)
/// print(fetched.response.status, fetched.response.value(forHeader: "Content-Type") ?? "")
/// let text = String(decoding: fetched.data, as: UTF8.self)
/// ```
public struct DownloadedData: Sendable, Hashable {
    /// The body, whole.
    public var data: Data
    /// The response whose body it is (after redirects; for a body resumed after a drop, the last
    /// answer's, a `206`): status, headers, final URL, type, length, validators.
    public var response: DownloadResponse
    /// What it cost: time to first byte, total time, requests and connections.
    public var timings: DownloadTimings

    /// Creates a value (Haul's come from ``DownloadManager/data(from:headers:maximumSize:)``).
    public init(data: Data, response: DownloadResponse, timings: DownloadTimings) {
        self.data = data
        self.response = response
        self.timings = timings
    }
}
