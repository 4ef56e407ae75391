/// What ``DownloadManager/enqueue(_:)`` did with its requests.
public struct EnqueueSummary: Sendable {
    /// A request that could not be queued.
    public struct Rejection: Sendable {
        /// Its position in the sequence given to `enqueue`.
        public var index: Int
        /// Why (an invalid URL, an unsupported scheme, a destination that is a directory).
        public var error: DownloadError
        /// The request as it was given: a caller who hands `enqueue` a sequence made as it is read
        /// (a list of millions) learns which one it was without keeping every request it made.
        public var request: DownloadRequest

        package init(index: Int, error: DownloadError, request: DownloadRequest) {
            self.index = index
            self.error = error
            self.request = request
        }
    }

    /// Requests queued now (new ones, and paused, interrupted or failed ones queued again).
    public var queued = 0
    /// Requests that were already queued or running.
    public var alreadyQueued = 0
    /// Requests whose destination already holds the complete file: nothing to do.
    public var alreadyComplete = 0
    /// Requests that were refused, in order.
    public var rejected: [Rejection] = []

    package init() {}
}
