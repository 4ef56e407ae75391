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
            now = DispatchTime.now().uptimeNanoseconds
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
            if request.deferredDecision == nil, !request.isRedirect {
                guard let easy = own.easy else { return (Self.refused, 0) }
                take(decideResponse(easy: easy))  // accepted: receiving; refused: closing
            }
            if request.isRedirect { return (chunk.count, 0) }  // a redirect's body: dropped, not counted
            if request.deferredDecision != nil {
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
            let now = DispatchTime.now().uptimeNanoseconds
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

    /// Drops what an answer from byte 0 repeats of the bytes the download has (``Request/skipping``),
    /// each compared with the bytes held at its place (``FileSink/holds(_:at:)``), then compares the
    /// start of an unvalidated resume's answer with the partial's last bytes. Returns the bytes after
    /// both (the decision went to the machine once all of it matched; empty while more is to come),
    /// or `nil` when they differ: another version behind the same validator, or another file (the
    /// download starts over; a stream fails).
    private func compareOverlap(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard let decision = request.deferredDecision else { return bytes }
        let none = UnsafeRawBufferPointer(start: nil, count: 0)
        var bytes = bytes
        if request.skipping > 0 {
            let dropped = Int(min(Int64(bytes.count), request.skipping))
            let same: Bool
            do {
                same =
                    try sink?.holds(UnsafeRawBufferPointer(rebasing: bytes[..<dropped]), at: request.skipped) ?? false
            } catch {
                // The partial cannot be read back: the request ends with this error (``requestEnded(_:)``).
                request.deferredDecision = nil
                bodyFailed(attributed(error))
                return nil
            }
            guard same else { return overlapDiffers() }
            request.skipping -= Int64(dropped)
            request.skipped += Int64(dropped)
            environment.metrics.bytesResent.increment(by: dropped)
            guard request.skipping == 0 else { return none }
            sink?.endComparing()
            bytes = UnsafeRawBufferPointer(rebasing: bytes[dropped...])
        }
        if let expected = request.overlap {
            let count = min(bytes.count, expected.count - request.overlapMatched)
            let matches = expected.withUnsafeBytes { stored in
                count == 0 || memcmp(stored.baseAddress! + request.overlapMatched, bytes.baseAddress!, count) == 0
            }
            guard matches else { return overlapDiffers() }
            request.overlapMatched += count
            environment.metrics.bytesResent.increment(by: count)
            guard request.overlapMatched == expected.count else { return none }
            log(.debug, "overlap matched", metadata: ["haul.bytes": "\(count)"])
            bytes = UnsafeRawBufferPointer(rebasing: bytes[count...])
        }
        request.deferredDecision = nil
        request.overlap = nil
        take(feed(decision))
        return bytes
    }

    /// The answer's first bytes are not the ones the download holds: the answer is another version,
    /// whatever its validator says. The download starts over (a stream, which cannot, fails).
    private func overlapDiffers() -> UnsafeRawBufferPointer? {
        log(.debug, "the bytes read past differ from the ones held", metadata: ["haul.offset": "\(request.skipped)"])
        sink?.endComparing()
        request.deferredDecision = nil
        request.overlap = nil
        request.skipping = 0
        take(feed(.retryFromZero(reason: .overlapMismatch)))
        return nil
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
