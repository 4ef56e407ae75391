/// A request the rate limiter may hold paused: a transfer's own, or one of its other connections.
protocol ParkedRequest: AnyObject {
    /// The transfer whose buckets it draws on.
    var limitedTransfer: Transfer { get }
    /// curl may give it bytes again.
    func unparked()
}
