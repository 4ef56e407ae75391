import CHaul
import Dispatch
import FoundationEssentials
import Glibc
import HaulValues

extension Transfer {
    /// Takes a chunk of the body of the request on `connection` (its own, or another connection's
    /// segment): what curl's write callback returns, the count taken (fewer makes curl end the
    /// request) or ``holdSignal`` (the rate limiter or the stream's reader holds it). Runs inside
    /// curl's callback: touches the file, the journal and events, never the multi handle.
    func receive(_ chunk: UnsafeRawBufferPointer, on connection: Connection) -> Int {
        let isOwn = connection === own
        if isOwn, stream != nil, holdsForReader() { return Self.holdSignal }
        let limiter = environment.rateLimiter
        var now: UInt64 = 0
        if !limiter.isIdle {
            now = clock.uptimeNanoseconds
            if limiter.mustWait(self, now: now) {
                // curl keeps the chunk and gives it again once the limiter lets the request go.
                limiter.hold(connection)
                return Self.holdSignal
            }
        }
        let (answer, taken): (Int, Int)
        if isOwn {
            (answer, taken) = receiveChunk(chunk)
        } else {
            (answer, taken) = receiveSegment(chunk, on: connection, now: now)
        }
        if taken > 0 {
            download.receivedBytes.add(Int64(taken), ordering: .relaxed)
            if environment.metrics.isRecording { environment.metrics.bytesReceived.increment(by: taken) }
            if now != 0 { limiter.took(taken, by: self, now: now) }
        }
        return answer
    }

    /// What curl's write callback returns to hold the request (`CURL_WRITEFUNC_PAUSE`): curl keeps
    /// the chunk and gives it again once the holder lets the request go (``Connection/letGo(by:)``).
    static let holdSignal = 0x1000_0001

    /// A chunk of the own request's answer: what curl's write callback returns, and the bytes
    /// counted as received (a redirect's body is not; bytes read past or compared are).
    private func receiveChunk(_ chunk: UnsafeRawBufferPointer) -> (Int, taken: Int) {
        var bytes = chunk
        if case .connecting = machine.state {
            if request.check == nil, !request.isRedirect {
                guard let easy = own.easy else { return (Self.refused, 0) }
                take(decideResponse(easy: easy))  // accepted: receiving; refused: closing
            }
            if request.isRedirect { return (chunk.count, 0) }  // a redirect's body: dropped, not counted
            if request.check != nil {
                guard let rest = compareOverlap(bytes) else { return (Self.refused, 0) }
                // More to compare.
                if rest.isEmpty, case .connecting = machine.state { return (chunk.count, chunk.count) }
                bytes = rest
            }
        }
        guard case .receiving = machine.state, let sink else { return (Self.refused, 0) }
        if bytes.isEmpty { return (chunk.count, chunk.count) }
        var cut = false
        let offered = bytes.count
        if segments != nil {
            (bytes, cut) = clipToOwnSegment(bytes)
            if bytes.isEmpty {
                own.segmentEnded = true
                return (Self.refused, 0)
            }
        }
        if let maximum = maximumSize, sink.receivedLength + Int64(bytes.count) > maximum {
            bodyFailed(tooLarge("the body grew past the maximum of \(maximum) bytes"))
            return (Self.refused, 0)
        }
        do {
            let now = clock.uptimeNanoseconds
            let wrote = try sink.append(bytes, now: now)
            if let segments {
                segments.wrote(bytes.count, by: own)
                if wrote { segmentBytesWritten() }
            }
            if wrote { reportProgress(now: now) }
        } catch {
            bodyFailed(attributed(error))
            return (Self.refused, 0)
        }
        if cut {
            // The rest of the answer belongs to segments other connections fetch.
            own.segmentEnded = true
            return (Self.refused, chunk.count - (offered - bytes.count))
        }
        return (chunk.count, chunk.count)
    }

    /// Compares the answer's bytes that repeat what the download holds (``OverlapCheck``): read
    /// past, each with the byte held at its place (``FileSink/holds(_:at:)``), then the partial's
    /// last bytes. Returns the bytes after them (the decision went to the machine once all of them
    /// matched; empty while more is to come), or `nil` when they differ: another version behind the
    /// same validator, or another file (the download starts over; a stream fails).
    private func compareOverlap(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard var check = request.check else { return bytes }
        let wasReadingPast = check.readingPast > 0
        let step: OverlapCheck.Step
        let compared: Int
        do {
            (step, compared) = try check.take(bytes) { (held, offset) throws(DownloadError) in
                try sink?.holds(held, at: offset) ?? false
            }
        } catch {
            // The partial cannot be read back: the request ends with this error (``requestEnded(_:)``).
            request.check = nil
            bodyFailed(attributed(error))
            return nil
        }
        environment.metrics.bytesResent.increment(by: compared)
        if wasReadingPast, check.readingPast == 0 { sink?.endComparing() }
        switch step {
        case .more:
            request.check = check
            return UnsafeRawBufferPointer(start: nil, count: 0)
        case .differs:
            log(.debug, "the bytes read past differ from the ones held", metadata: ["haul.offset": "\(check.readPast)"])
            sink?.endComparing()
            request.check = nil
            request.overlap = nil
            take(feed(.retryFromZero(reason: .overlapMismatch)))
            return nil
        case .matched(let decision, let newBytesAt):
            if check.overlapMatched > 0 {
                log(.debug, "overlap matched", metadata: ["haul.bytes": "\(check.overlapMatched)"])
            }
            request.check = nil
            request.overlap = nil
            take(feed(decision))
            return UnsafeRawBufferPointer(rebasing: bytes[newBytesAt...])
        }
    }

    /// What curl's write callback returns to refuse a body (`CURL_WRITEFUNC_ERROR`).
    static let refused = Int(0xFFFF_FFFF)

    /// Writing the body failed here: the machine ends the request (curl is refused the next chunk),
    /// and bytes still buffered for it are not written (the first error is the one reported).
    func bodyFailed(_ error: DownloadError) {
        if own.error == nil { own.error = error }
        machine.bodyFailed(error)
    }

    /// Reports progress, at most once per progress interval.
    func reportProgress(now: UInt64) {
        guard let sink else { return }
        speed.record(bytes: segments?.map.bytesWritten ?? sink.committedLength, at: now)
        guard now &- lastProgressAt >= environment.progressInterval else { return }
        lastProgressAt = now
        events.publish(.progress(progress()))
    }

    /// A slow download gives its buffer back (see ``FileSink``): memory follows the transfers that
    /// are fast, not the ones that are live.
    func releaseIdleBuffer(now: UInt64) {
        guard case .receiving = machine.state, let sink else { return }
        do {
            if try sink.releaseIfIdle(now: now) { reportProgress(now: now) }
        } catch {
            bodyFailed(attributed(error))  // the next chunk fails the transfer
        }
    }
}
