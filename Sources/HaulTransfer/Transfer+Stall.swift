extension Transfer {
    /// The requests of this transfer that received nothing for `timeout` nanoseconds while it
    /// receives a body (its own, and those of its other connections): the scheduler's sweep (every
    /// 250 ms) ends each as curl ends one with `CURLE_OPERATION_TIMEDOUT`, so that a stall is noticed
    /// within the stall timeout and a quarter of a second. (curl's own low-speed check averages the
    /// speed over about five seconds first: with a 3 s timeout it took about 9 s; it stays on as the
    /// backstop, for the wait for a response's head.) A request the rate limiter or a stream's
    /// reader holds is not stalled. Returns the easy handles to end.
    package func stalledRequests(now: UInt64, after timeout: UInt64) -> [UnsafeMutableRawPointer] {
        guard case .receiving = machine.state else {
            stallMark = nil
            return []
        }
        var stalled: [UnsafeMutableRawPointer] = []
        let ownRequestCounts = segments == nil || segments?.primaryStart != nil
        if let easy, ownRequestCounts, !parkedByLimiter, !parkedByStream,
            Self.hasStalled(&stallMark, bytes: sink?.receivedLength ?? 0, now: now, timeout: timeout)
        {
            stalled.append(easy.raw)
        } else if easy == nil || !ownRequestCounts || parkedByLimiter || parkedByStream {
            stallMark = nil
        }
        for fetch in segments?.fetches ?? [] {
            guard let easy = fetch.easy, !fetch.parkedByLimiter else {
                fetch.stallMark = nil
                continue
            }
            if Self.hasStalled(&fetch.stallMark, bytes: fetch.sink.receivedLength, now: now, timeout: timeout) {
                stalled.append(easy.raw)
            }
        }
        return stalled
    }

    /// Whether `bytes` stayed as `mark` last saw them for `timeout`; moves the mark when they changed.
    private static func hasStalled(
        _ mark: inout (bytes: Int64, since: UInt64)?,
        bytes: Int64,
        now: UInt64,
        timeout: UInt64
    ) -> Bool {
        guard let seen = mark, seen.bytes == bytes else {
            mark = (bytes, now)
            return false
        }
        return now &- seen.since >= timeout
    }
}
