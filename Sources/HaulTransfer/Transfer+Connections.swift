import CHaul
import Dispatch
import FoundationEssentials
import Glibc
import HaulIO
import HaulValues

/// A download over several connections: the connections beyond the transfer's own request.
extension Transfer {
    // MARK: the other connections

    /// Opens one more connection for the next segment. Whether it did.
    package func openConnection() -> Bool {
        guard let segments, wantsConnection,
            let index = segments.nextSegment(now: DispatchTime.now().uptimeNanoseconds)
        else { return false }
        let sink: FileSink
        do {
            sink = try FileSink(path: partialPath, pool: environment.buffers, openFiles: environment.openPartialFiles)
        } catch {
            return false
        }
        guard let easy = environment.easyHandles.take() else { return false }
        let fetch = SegmentFetch(transfer: self, start: segments.map.segments[index].start, sink: sink)
        fetch.easy = easy
        segments.fetches.append(fetch)
        guard send(fetch) else {
            retire(fetch)
            return false
        }
        return true
    }

    /// Sends `fetch`'s request for the rest of its segment. Whether curl took it.
    private func send(_ fetch: SegmentFetch) -> Bool {
        guard let segments, let easy = fetch.easy, let index = segments.map.index(startingAt: fetch.start) else {
            return false
        }
        let segment = segments.map.segments[index]
        do {
            try fetch.sink.move(to: segment.next)
        } catch {
            bodyFailed(attributed(error))
            return false
        }
        fetch.requestedAt = DispatchTime.now().uptimeNanoseconds
        fetch.writtenAtRequest = segment.written
        fetch.answered = false
        fetch.ended = false
        fetch.changed = nil
        fetch.error = nil
        fetch.asksAgain = false
        // In the form the host honours (a CDN that ignores an ETag If-Range gets a date, or none).
        fetch.ifRangeForm = environment.ifRangeForms[segments.target.hostKey] ?? .validator
        easy.configure(
            url: segments.target.absoluteString,
            options: environment.easyHandles.options,
            write: SegmentFetch.writeCallback,
            context: Unmanaged.passUnretained(fetch).toOpaque(),
            ownConnection: true
        )
        easy.setUserAgent(record.userAgent, options: environment.easyHandles.options)
        if let limit = environment.rateLimiter.smallestLimit(for: self) {
            easy.setReceiveBufferSize(Int(min(Int64(easy.receiveBufferSize), max(1024, limit / 20))))
        }
        easy.setConditions(
            rangeFrom: segment.next,
            to: segment.end - 1,
            ifRange: record.ifRangeValidator.flatMap { _ in ifRangeValue(fetch.ifRangeForm) },
            extra: segments.sendsHeaders ? headers : []
        )
        guard environment.reactor.add(easy.raw) == CURLM_OK else { return false }
        log(
            .debug,
            "segment request",
            metadata: [
                "haul.range.first": "\(segment.next)",
                "haul.range.last": "\(segment.end - 1)",
            ]
        )
        return true
    }

    /// Takes `fetch` out: its handle goes back to the pool (or away, if curl holds it paused), its
    /// sink writes what it buffered.
    private func retire(_ fetch: SegmentFetch) {
        if let easy = fetch.easy {
            environment.reactor.remove(easy.raw)
            countConnection(of: easy)
            if fetch.parkedByLimiter {
                fetch.parkedByLimiter = false
                environment.rateLimiter.unpark(fetch)
            } else {
                environment.easyHandles.recycle(easy)
            }
            fetch.easy = nil
        }
        do {
            try fetch.sink.close()
        } catch {
            bodyFailed(attributed(error))
        }
        segments?.fetches.removeAll { $0 === fetch }
    }

    /// Stops every other connection; the map keeps their bytes.
    func stopFetches() {
        guard let segments else { return }
        for fetch in segments.fetches { retire(fetch) }
    }

    /// A chunk of `fetch`'s answer: checks the answer first, then writes what fits in its segment.
    func receive(_ chunk: UnsafeRawBufferPointer, for fetch: SegmentFetch) -> Int {
        let limiter = environment.rateLimiter
        var now: UInt64 = 0
        if !limiter.isIdle {
            now = DispatchTime.now().uptimeNanoseconds
            if limiter.mustWait(self, now: now) {
                fetch.parkedByLimiter = true
                limiter.park(fetch)
                return Self.pauseSignal
            }
        }
        guard let segments, let easy = fetch.easy else { return Self.refused }
        if !fetch.answered {
            guard judge(fetch, easy: easy) else { return Self.refused }
        }
        guard case .receiving = machine.state, let index = segments.map.index(startingAt: fetch.start) else {
            return Self.refused
        }
        let room = segments.map.segments[index].remaining
        let count = Int(min(Int64(chunk.count), room))
        if count > 0 {
            let bytes = UnsafeRawBufferPointer(rebasing: chunk[0..<count])
            do {
                if now == 0 { now = DispatchTime.now().uptimeNanoseconds }
                let wrote = try fetch.sink.append(bytes, now: now)
                segments.map.wrote(Int64(count), in: index)
                if wrote { segmentBytesWritten() }
                speed.record(bytes: segments.map.bytesWritten, at: now)
                if now &- lastProgressAt >= environment.progressInterval {
                    lastProgressAt = now
                    events.publish(.progress(progress()))
                }
            } catch {
                fetch.error = attributed(error)
                bodyFailed(attributed(error))
                return Self.refused
            }
            download.receivedBytes.add(Int64(count), ordering: .relaxed)
            if !limiter.isIdle { limiter.took(count, by: self, now: now) }
        }
        guard count == chunk.count else {
            fetch.ended = true  // a split gave the rest to another connection
            return Self.refused
        }
        return chunk.count
    }

    /// Whether `fetch`'s answer is the rest of its segment of the same file: a 206 from the asked
    /// byte, with the same length and validator. Another version marks it changed; any other answer
    /// is refused with its error.
    private func judge(_ fetch: SegmentFetch, easy: EasyHandle) -> Bool {
        fetch.answered = true
        guard let segments, let index = segments.map.index(startingAt: fetch.start) else { return false }
        let status = easy.responseCode
        // Segments are planned only for a file with a strong validator: its pin.
        let match =
            record.pinnedVersion?.match(entityTag: easy.header("ETag"), lastModified: easy.header("Last-Modified"))
            ?? .unproven
        if (200...299).contains(status), match == .unproven {
            // No version named (an overloaded server's error page as 200): this connection failed,
            // the others go on; it is not "the file changed".
            fetch.error = DownloadError(
                code: .unexpectedAnswer,
                url: urlForErrors,
                detail: PinnedVersion.unprovenDetail(
                    kind: record.pinnedVersion?.kind ?? .entityTag,
                    contentType: easy.header("Content-Type"),
                    length: easy.contentLength
                )
            )
            return false
        }
        if match == .other { versionsDiffered() }
        let sameVersion = match == .same
        switch status {
        case 206:
            guard case .range(let first, _, let total)? = easy.header("Content-Range").flatMap(ContentRange.init),
                total == segments.map.total, sameVersion
            else {
                fetch.changed = .remoteChanged
                return false
            }
            guard first == segments.map.segments[index].next else {
                // Not the bytes asked for: nothing this server sends for ranges is trusted.
                fetch.changed = .rangeMismatch
                return false
            }
            return true
        case 200:
            let whole = sameVersion && easy.contentLength == segments.map.total
            if whole, easy.header("Accept-Ranges")?.lowercased() == "bytes",
                let next = fetch.ifRangeForm.next(
                    hasStrongDate: record.lastModifiedIsStrong && record.lastModified != nil
                )
            {
                // The server ignored this If-Range (a CDN that answers an ETag one whole): the same
                // range again, in the next form, from now on (``IfRangeForm``).
                environment.ifRangeForms[segments.target.hostKey] = next
                fetch.asksAgain = true
                return false
            }
            // If-Range sent the whole file: another version; or the same one, without the range.
            fetch.changed = whole ? .rangeIgnored : .remoteChanged
            return false
        default:
            fetch.error = DownloadError(code: .httpStatus, url: urlForErrors, httpStatus: status)
            return false
        }
    }

    /// curl finished `fetch`'s request: the connection takes the next segment, or stops; the
    /// download completes once every segment is whole, or the attempt ends on a failure.
    func fetchEnded(_ fetch: SegmentFetch, result: CURLcode) -> DownloadStateMachine.Action {
        guard let segments, segments.fetches.contains(where: { $0 === fetch }), let easy = fetch.easy else {
            return .none
        }
        if result == CURLE_OK, !fetch.answered { _ = judge(fetch, easy: easy) }
        if fetch.asksAgain, case .receiving = machine.state {
            environment.reactor.remove(easy.raw)
            if send(fetch) { return .none }
            retire(fetch)
            segmentBytesWritten()
            return finishIfWhole()
        }
        if let reason = fetch.changed { return fileChanged(reason) }
        let whole = segments.map.index(startingAt: fetch.start).map { segments.map.segments[$0].isDone } ?? true
        guard whole || fetch.ended else {
            let error = segmentFailure(result, refused: fetch.error, easy: easy, stalledFor: fetch.stalledFor)
            // A failed write (a full disk) fails the download: the machine is no longer receiving.
            guard liveConnections > 1, case .receiving = machine.state else { return endAttempt(.failed(error)) }
            // Others go on: this one stops, and the download uses one connection fewer from now on;
            // its segment goes to the next connection that finishes its own.
            segments.connections = max(1, liveConnections - 1)
            log(
                .debug,
                "a connection failed; the others go on",
                metadata: [
                    "haul.error": "\(error)",
                    "haul.connections": "\(segments.connections)",
                ]
            )
            retire(fetch)
            segmentBytesWritten()
            return .none
        }
        environment.reactor.remove(easy.raw)
        if case .receiving = machine.state, !fetch.parkedByLimiter,
            let next = segments.nextSegment(now: DispatchTime.now().uptimeNanoseconds)
        {
            fetch.start = segments.map.segments[next].start
            if send(fetch) {
                segmentBytesWritten()
                return .none
            }
        }
        retire(fetch)
        segmentBytesWritten()
        return finishIfWhole()
    }

    /// The transfer's own request reached the end of its segment (or curl finished it there).
    func primaryFinished(_ result: CURLcode) -> DownloadStateMachine.Action {
        guard let segments, let start = segments.primaryStart else { return .none }
        let whole = segments.map.index(startingAt: start).map { segments.map.segments[$0].isDone } ?? true
        if !whole, request.bodyError == nil, liveConnections > 1 {
            // The connection failed and others go on, one fewer from now on; its segment goes to the
            // next connection that finishes its own.
            stopRequest()
            segments.primaryStart = nil
            segments.connections = max(1, liveConnections)
            do {
                try sink?.flush()
            } catch {
                return endAttempt(.failed(attributed(error)))
            }
            segmentBytesWritten()
            return .none
        }
        guard whole else {
            return endAttempt(
                .failed(segmentFailure(result, refused: request.bodyError, easy: easy, stalledFor: request.stalledFor))
            )
        }
        stopRequest()
        segments.primaryStart = nil
        do {
            try sink?.flush()
        } catch {
            return endAttempt(.failed(attributed(error)))
        }
        segmentBytesWritten()
        askForConnections()  // its connection's share goes to a segment left
        return finishIfWhole()
    }

    /// Why a request ended before its segment did: the error its answer was refused with, else an
    /// answer cut short, else curl's.
    private func segmentFailure(
        _ result: CURLcode,
        refused: DownloadError?,
        easy: EasyHandle?,
        stalledFor: Int64?
    ) -> DownloadError {
        if let refused { return refused }
        guard result != CURLE_OK else {
            return DownloadError(
                code: .sizeMismatch,
                url: urlForErrors,
                detail: "the answer ended before the end of its segment"
            )
        }
        return transportFailure(result, easy: easy, stalledFor: stalledFor, target: request.target)
    }

    /// Every segment is whole and no connection is left: the download completes.
    func finishIfWhole() -> DownloadStateMachine.Action {
        guard let segments, segments.map.isComplete, segments.fetches.isEmpty, easy == nil,
            case .receiving = machine.state
        else { return .none }
        do {
            try sink?.flush()
        } catch {
            return endAttempt(.failed(attributed(error)))
        }
        return perform(machine.transferEnded(.finished, progressed: true))
    }

    /// A connection failed: every connection stops (the map keeps their bytes), and the machine
    /// decides (a retry resumes each segment where it stopped).
    func endAttempt(_ result: DownloadStateMachine.TransferResult) -> DownloadStateMachine.Action {
        stopFetches()
        stopRequest()
        switch machine.state {
        case .connecting, .receiving, .closing: break
        default: return .none
        }
        return perform(machine.transferEnded(result, progressed: bytesThisAttempt > 0))
    }

    /// A connection's answer was another version of the file (or the whole file, the range
    /// ignored): every connection stops, the partial is emptied, and the download starts again once
    /// on the new version.
    func fileChanged(_ reason: RestartReason) -> DownloadStateMachine.Action {
        stopFetches()
        stopRequest()
        let action = machine.fileChanged(reason)
        if case .startRequest = action {
            if reason == .rangeIgnored { segmentsRefused = true }
            restarted(because: reason, discarding: bytesOnDisk)
        }
        return perform(action)
    }
}
