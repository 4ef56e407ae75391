extension Transfer {
    /// The requests of this transfer that received nothing for `timeout` nanoseconds while it
    /// receives a body (its own, and those of its other connections): the scheduler's sweep (every
    /// 250 ms) ends each as curl ends one with `CURLE_OPERATION_TIMEDOUT`, so that a stall is noticed
    /// within the stall timeout and a quarter of a second. (curl's own low-speed check averages the
    /// speed over about five seconds first: with a 3 s timeout it took about 9 s; it stays on as the
    /// backstop, for the wait for a response's head.) A request the rate limiter or a stream's
    /// reader holds is not stalled. Returns the easy handles to end.
    func stalledRequests(now: UInt64, after timeout: UInt64) -> [UnsafeMutableRawPointer] {
        guard case .receiving = machine.state else {
            own.stallMark = nil
            return []
        }
        var stalled: [UnsafeMutableRawPointer] = []
        // Over several connections, its own request counts while it fetches a segment.
        if segments != nil, own.segment == nil {
            own.stallMark = nil
        } else if own.hasStalled(now: now, after: timeout), let easy = own.easy {
            stalled.append(easy.raw)
        }
        for connection in segments?.others ?? [] where connection.hasStalled(now: now, after: timeout) {
            if let easy = connection.easy { stalled.append(easy.raw) }
        }
        return stalled
    }
}
