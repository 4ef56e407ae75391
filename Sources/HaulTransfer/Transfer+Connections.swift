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
    func openConnection() -> Bool {
        guard let segments, let partialPath, wantsConnection,
            let segment = segments.nextSegment(now: clock.uptimeNanoseconds)
        else { return false }
        let sink: FileSink
        do {
            sink = try FileSink(path: partialPath, pool: environment.buffers, openFiles: environment.openPartialFiles)
        } catch {
            return false
        }
        guard let easy = environment.easyHandles.take() else { return false }
        let connection = Connection(transfer: self, sink: sink)
        connection.easy = easy
        segments.add(connection, for: segment)
        guard send(connection) else {
            retire(connection)
            return false
        }
        return true
    }

    /// Sends `connection`'s request for the rest of its segment. Whether curl took it.
    private func send(_ connection: Connection) -> Bool {
        guard let segments, let easy = connection.easy, let sink = connection.sink,
            let segment = segments.segment(of: connection)
        else { return false }
        do {
            try sink.move(to: segment.next)
        } catch {
            bodyFailed(attributed(error))
            return false
        }
        connection.take(segment)  // its speed on the segment counts from this request
        // In the form the host honours (a CDN that ignores an ETag If-Range gets a date, or none).
        connection.begin(
            from: segment.next,
            to: segment.end - 1,
            ifRange: environment.ifRangeForms[segments.target.hostKey] ?? .validator
        )
        let ifRange = record.ifRangeValidator.flatMap { _ in ifRangeValue(connection.ifRangeForm) }
        let code = launch(
            connection,
            with: easy,
            to: segments.target,
            sendsHeaders: segments.sendsHeaders,
            ifRange: ifRange
        )
        guard code == CURLM_OK else { return false }
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

    /// Takes `connection` out: its request leaves curl, its sink writes what it buffered.
    private func retire(_ connection: Connection) {
        connection.stop()
        do {
            try connection.sink?.close()
        } catch {
            bodyFailed(attributed(error))
        }
        segments?.remove(connection)
    }

    /// Stops every other connection; the map keeps their bytes.
    func stopFetches() {
        guard let segments else { return }
        for connection in segments.others { retire(connection) }
    }

    /// A chunk of another connection's answer: checks the answer first, then writes what fits in
    /// its segment. Returns what curl's write callback returns, and the bytes taken.
    func receiveSegment(_ chunk: UnsafeRawBufferPointer, on connection: Connection, now: UInt64) -> (Int, taken: Int) {
        guard let segments, let easy = connection.easy, let sink = connection.sink else { return (Self.refused, 0) }
        if connection.verdict == nil {
            connection.verdict = judge(connection, easy: easy)
        }
        guard connection.verdict == .rest, case .receiving = machine.state, let room = segments.room(for: connection)
        else { return (Self.refused, 0) }
        let count = Int(min(Int64(chunk.count), room))
        if count > 0 {
            let bytes = UnsafeRawBufferPointer(rebasing: chunk[0..<count])
            let now = now == 0 ? clock.uptimeNanoseconds : now
            do {
                let wrote = try sink.append(bytes, now: now)
                segments.wrote(count, by: connection)
                if wrote { segmentBytesWritten() }
                speed.record(bytes: segments.map.bytesWritten, at: now)
                if now &- lastProgressAt >= environment.progressInterval {
                    lastProgressAt = now
                    events.publish(.progress(progress()))
                }
            } catch {
                connection.error = attributed(error)
                bodyFailed(attributed(error))
                return (Self.refused, 0)
            }
        }
        guard count == chunk.count else {
            connection.segmentEnded = true  // a split gave the rest to another connection
            return (Self.refused, count)
        }
        return (chunk.count, count)
    }

    /// What `connection`'s answer is (``Segments/answer(status:contentRange:contentLength:match:total:asked:)``):
    /// the rest of its segment of the same file, another version, the same range to ask again in
    /// the next `If-Range` form, or refused with its error.
    private func judge(_ connection: Connection, easy: EasyHandle) -> Segments.Verdict {
        guard let segments else { return .refused }
        let status = easy.responseCode
        // Segments are planned only for a file with a strong validator: its pin.
        let match = record.pinnedVersion?.match(readHead(of: easy, status: status, pinned: true)) ?? .unproven
        if match == .other, (200...299).contains(status) { versionsDiffered() }
        let answer = Segments.answer(
            status: status,
            contentRange: easy.header("Content-Range"),
            contentLength: easy.contentLength,
            match: match,
            total: segments.map.total,
            asked: connection.rangeStart
        )
        switch answer {
        case .rest:
            return .rest
        case .unproven:
            // No version named (an overloaded server's error page as 200): this connection failed,
            // the others go on; it is not "the file changed".
            connection.error = DownloadError(
                code: .unexpectedAnswer,
                url: urlForErrors,
                detail: PinnedVersion.unprovenDetail(
                    kind: record.pinnedVersion?.kind ?? .entityTag,
                    contentType: easy.header("Content-Type"),
                    length: easy.contentLength
                )
            )
            return .refused
        case .changed(.rangeIgnored) where easy.header("Accept-Ranges")?.lowercased() == "bytes":
            guard
                let next = connection.ifRangeForm.next(
                    hasStrongDate: record.lastModifiedIsStrong && record.lastModified != nil
                )
            else { return .changed(.rangeIgnored) }
            // The server ignored this If-Range (a CDN that answers an ETag one whole): the same
            // range again, in the next form, from now on (``IfRangeForm``).
            environment.ifRangeForms[segments.target.hostKey] = next
            return .askAgain
        case .changed(let reason):
            return .changed(reason)
        case .other:
            connection.error = DownloadError(code: .httpStatus, url: urlForErrors, httpStatus: status)
            return .refused
        }
    }

    /// curl finished `connection`'s request: the connection takes the next segment, or stops; the
    /// download completes once every segment is whole, or the attempt ends on a failure.
    func fetchEnded(_ connection: Connection, result: CURLcode) -> DownloadStateMachine.Action {
        guard let segments, segments.others.contains(where: { $0 === connection }), let easy = connection.easy else {
            return .none
        }
        if result == CURLE_OK, connection.verdict == nil { connection.verdict = judge(connection, easy: easy) }
        if connection.verdict == .askAgain, case .receiving = machine.state {
            environment.reactor.remove(easy.raw)
            if send(connection) { return .none }
            retire(connection)
            segmentBytesWritten()
            return finishIfWhole()
        }
        if case .changed(let reason) = connection.verdict { return fileChanged(reason) }
        guard segments.isWhole(for: connection) || connection.segmentEnded else {
            let error = segmentFailure(result, on: connection)
            // A failed write (a full disk) fails the download: the machine is no longer receiving.
            guard liveConnections > 1, case .receiving = machine.state else { return endAttempt(.failed(error)) }
            // Others go on: this one stops, and the download uses one connection fewer from now on;
            // its segment goes to the next connection that finishes its own.
            segments.allowed = max(1, liveConnections - 1)
            log(
                .debug,
                "a connection failed; the others go on",
                metadata: [
                    "haul.error": "\(error)",
                    "haul.connections": "\(segments.allowed)",
                ]
            )
            retire(connection)
            segmentBytesWritten()
            return .none
        }
        environment.reactor.remove(easy.raw)
        if case .receiving = machine.state, connection.heldBy == nil,
            let next = segments.nextSegment(now: clock.uptimeNanoseconds)
        {
            connection.take(next)
            if send(connection) {
                segmentBytesWritten()
                return .none
            }
        }
        retire(connection)
        segmentBytesWritten()
        return finishIfWhole()
    }

    /// The transfer's own request reached the end of its segment (or curl finished it there).
    func ownSegmentEnded(_ result: CURLcode) -> DownloadStateMachine.Action {
        guard let segments, own.segment != nil else { return .none }
        let whole = segments.isWhole(for: own)
        if !whole, own.error == nil, liveConnections > 1 {
            // The connection failed and others go on, one fewer from now on; its segment goes to the
            // next connection that finishes its own.
            stopRequest()
            own.segment = nil
            segments.allowed = max(1, liveConnections)
            do {
                try sink?.flush()
            } catch {
                return endAttempt(.failed(attributed(error)))
            }
            segmentBytesWritten()
            return .none
        }
        guard whole else { return endAttempt(.failed(segmentFailure(result, on: own))) }
        stopRequest()
        own.segment = nil
        do {
            try sink?.flush()
        } catch {
            return endAttempt(.failed(attributed(error)))
        }
        segmentBytesWritten()
        // Its connection's share goes to a segment left: the owner asks after every request's end.
        return finishIfWhole()
    }

    /// Why a request ended before its segment did: the error its answer was refused with, else an
    /// answer cut short, else curl's.
    private func segmentFailure(_ result: CURLcode, on connection: Connection) -> DownloadError {
        if let refused = connection.error { return refused }
        guard result != CURLE_OK else {
            return DownloadError(
                code: .sizeMismatch,
                url: urlForErrors,
                detail: "the answer ended before the end of its segment"
            )
        }
        return transportFailure(result, on: connection)
    }

    /// Every segment is whole and no connection is left: the download completes.
    func finishIfWhole() -> DownloadStateMachine.Action {
        guard let segments, segments.map.isComplete, segments.others.isEmpty, own.easy == nil,
            case .receiving = machine.state
        else { return .none }
        do {
            try sink?.flush()
        } catch {
            return endAttempt(.failed(attributed(error)))
        }
        return perform(machine.transferEnded(.received, progressed: true))
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
            restarted(because: reason, discarding: bytesOnDisk)
        }
        return perform(action)
    }
}
