import Synchronization

extension Transfer {
    /// Whether its request has received nothing for `timeout` nanoseconds while receiving a body:
    /// the scheduler's sweep (every 250 ms) ends such a request as curl ends one with
    /// `CURLE_OPERATION_TIMEDOUT`, so that a stall is noticed within the stall timeout and a
    /// quarter of a second. (curl's own low-speed check averages the speed over about five seconds
    /// first: with a 3 s timeout it took about 9 s; it stays on as the backstop, for the wait for a
    /// response's head and for the connections of a download fetched over several.) A request the
    /// rate limiter holds is not stalled.
    func isStalled(now: UInt64, after timeout: UInt64) -> Bool {
        guard segments == nil, easy != nil, case .receiving = machine.state, !parkedByLimiter, !parkedByStream else {
            stallMark = nil
            return false
        }
        let bytes = download.receivedBytes.load(ordering: .relaxed)
        guard let mark = stallMark, mark.bytes == bytes else {
            stallMark = (bytes, now)
            return false
        }
        return now &- mark.since >= timeout
    }
}
