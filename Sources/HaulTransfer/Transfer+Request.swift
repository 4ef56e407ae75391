import CHaul
import FoundationEssentials
import HaulIO
import HaulValues

extension Transfer {
    /// Sends a request for the bytes after the partial file (emptying it first when `truncating`),
    /// to the download's URL or to where a redirect led (`hop`, with the headers only when it is the
    /// same origin). Returns the owner's action when the request cannot be made (a failure), else
    /// `.none`.
    func startRequest(truncating: Bool, to hop: Redirect? = nil) -> DownloadStateMachine.Action {
        var target = download.url
        var sendsHeaders = true
        // A redirect's next request asks for the same URL of the download as the one it answered.
        let asked = hop == nil ? target : request.asked ?? target
        if case .follow(let url, let sameOrigin) = hop { (target, sendsHeaders) = (url, sameOrigin) }
        if self.sink == nil, stream == nil, hop == nil, foundPlacedFile() {
            // Placed by a process killed before its row said so: complete, nothing asked again.
            return perform(machine.foundComplete())
        }
        let plan: ResumePlan
        let overlap: [UInt8]?
        do throws(DownloadError) {
            guard let planned = try readyPartial(truncating: truncating, hop: hop, target: target) else {
                // Every segment is whole (a process stopped before it moved the file into place).
                return perform(machine.foundComplete())
            }
            (plan, overlap) = planned
        } catch {
            return perform(machine.fail(attributed(error)))
        }
        guard let easy = own.easy ?? environment.easyHandles.take() else {
            return perform(
                machine.fail(DownloadError(code: .internalError, url: urlForErrors, detail: "curl_easy_init failed"))
            )
        }
        // Bytes still in the buffer are the file's too: they are written before the next ones.
        request = Request(offset: sink?.receivedLength ?? 0)
        let validator = beginOwn(plan, overlap: overlap, to: target)
        let ifRange = validator.flatMap { _ in ifRangeValue(own.ifRangeForm) }
        if hop == nil { startSpan() }
        (request.target, request.sendsHeaders, request.asked) = (target, sendsHeaders, asked)
        let code = launch(own, with: easy, to: target, sendsHeaders: sendsHeaders, ifRange: ifRange)
        guard code == CURLM_OK else {
            environment.easyHandles.recycle(easy)
            own.easy = nil
            return perform(
                machine.fail(
                    DownloadError(
                        code: .internalError,
                        url: urlForErrors,
                        detail: "curl_multi_add_handle failed: \(String(cString: curl_multi_strerror(code)))"
                    )
                )
            )
        }
        log(
            .debug,
            "request",
            metadata: [
                "haul.url": "\(hop == nil ? urlForErrors : target.redactedString)",
                "haul.range.first": "\(own.rangeStart)",
            ]
        )
        if hop == nil { events.publish(.connecting(progress())) }
        return .none
    }

    /// Puts the request on `connection` (the own request or another connection's) into curl with
    /// `easy`: to `target`, for the connection's range with `ifRange` (the own request revalidating
    /// a complete file: conditional on the row's validators instead), with the download's headers
    /// when `sendsHeaders`, and a receive buffer that fits the rate limit. curl's answer.
    func launch(
        _ connection: Connection,
        with easy: EasyHandle,
        to target: URL,
        sendsHeaders: Bool,
        ifRange: String?
    ) -> CURLMcode {
        let options = environment.easyHandles.options
        easy.configure(
            url: target.absoluteString,
            options: options,
            write: Connection.writeCallback,
            context: Unmanaged.passUnretained(connection).toOpaque(),
            ownConnection: connection !== own
        )
        easy.setUserAgent(record.userAgent, options: options)
        if let limit = environment.rateLimiter.smallestLimit(for: self) {
            // A chunk at most a twentieth of the rate: one read never overshoots a window by much.
            easy.setReceiveBufferSize(Int(min(Int64(easy.receiveBufferSize), max(1024, limit / 20))))
        }
        let extra = sendsHeaders ? headers : []
        if revalidating, connection === own {
            easy.setConditions(
                rangeFrom: 0,
                ifRange: nil,
                ifNoneMatch: record.entityTag,
                ifModifiedSince: record.entityTag == nil ? record.lastModified : nil,
                extra: extra
            )
        } else {
            easy.setConditions(
                rangeFrom: connection.rangeStart,
                to: connection.rangeLast,
                ifRange: ifRange,
                extra: extra
            )
        }
        connection.easy = easy
        return environment.reactor.add(easy.raw)
    }

    /// The answer was a redirect to `location` (its body dropped): the next request goes there, with
    /// the same range and conditions, or the download fails (too many redirects, a scheme Haul does
    /// not download).
    private func followRedirect(to location: String?) -> DownloadStateMachine.Action {
        // Sent to another host by its first answer: said up now that curl let go of its stream
        // (at the head, the stream still counted on its connection).
        if leavesHost {
            leavesHost = false
            environment.hand(.leftHost, from: self)
        }
        let redirect = Redirect.decide(
            location: location,
            original: download.url,
            followed: redirectsFollowed,
            limit: environment.easyHandles.options.maximumRedirects
        )
        switch redirect {
        case .refuse(let error):
            return perform(machine.transferEnded(.failed(attributed(error))))
        case .follow(let target, _):
            redirectsFollowed += 1
            if download.url.scheme?.lowercased() == "https", target.scheme?.lowercased() == "http",
                !warnedOfInsecureRedirect
            {
                // Followed, as curl and wget do; said once per download, not per attempt.
                warnedOfInsecureRedirect = true
                let shown = URL(string: target.redactedString) ?? target
                events.publish(.warning(.insecureRedirect(shown)))
            }
            return startRequest(truncating: false, to: redirect)
        }
    }

    /// Takes the request out of curl, if any.
    func stopRequest() {
        guard own.easy != nil else { return }
        closeStreamWatch()
        own.stop()
    }

    /// A request's handle left curl: whether it opened a connection or went over one already open
    /// (``Download/timings``). The transfer's own requests and its segments' alike.
    func countConnection(of easy: EasyHandle) {
        let (opened, status, phases) = (easy.connectionsOpened, easy.responseCode, easy.phaseTimes)
        download.ledger.withLock { $0.requestStopped(opened: opened, status: status, phases: phases) }
    }

    /// curl finished the request (its handle is still in the multi handle): decides how the attempt
    /// ended and returns what the owner does next.
    func requestEnded(_ result: CURLcode) -> DownloadStateMachine.Action {
        guard let easy = own.easy else { return .none }
        if segments != nil, own.segment != nil, case .receiving = machine.state {
            // A segment of a file fetched over several connections.
            return ownSegmentEnded(result)
        }
        if result == CURLE_OK, case .connecting = machine.state {
            if request.check != nil {
                // The answer ended inside the stretch it had to repeat: it is not the rest of this file.
                request.check = nil
                take(feed(.retryFromZero(reason: .rangeMismatch)))
            } else if !request.isRedirect {
                // An empty body never reached the write callback: decide from the head now.
                take(decideResponse(easy: easy))
            }
            if request.isRedirect {
                let location = easy.redirectURL
                stopRequest()
                return followRedirect(to: location)
            }
        }
        let ended: DownloadStateMachine.TransferResult
        if result == CURLE_OK {
            ended = receivedResult()
        } else if result == CURLE_WRITE_ERROR, let error = own.error {
            // Refused before the body was accepted (the partial could not be read back to compare).
            ended = .failed(error)
        } else {
            ended = .failed(transportFailure(result, on: own))
        }
        stopRequest()
        if machine.hasEnded { return .none }
        // A body received whole may still be in the sink's buffer, which reaches the file only when
        // the finishing job writes it: if the disk refuses that, the attempt brought nothing to it.
        let progressed = ended == .received ? bytesWrittenThisAttempt > 0 : bytesThisAttempt > 0
        return perform(machine.transferEnded(ended, progressed: progressed))
    }

    /// Whether the file this download's last process was about to place (``JournalRow/placing``)
    /// is at its destination (or, for a name chosen for the caller, at the `name.N` it moved on to):
    /// that process was killed after the move and before its row said completed. The download
    /// then completes from it; a partial file left beside it (older bytes the placed file replaced)
    /// goes.
    private func foundPlacedFile() -> Bool {
        guard let identity = record.placing, !record.awaitsName else { return false }
        let destination = download.destinationPath
        guard let path = PlacedFile.find(identity, at: destination, numbered: record.movesPastFilesFound) else {
            return false
        }
        if let partialPath { unlink(partialPath) }
        if path != destination {
            record.destination = path
            download.update(destinationPath: path)
        }
        log(.debug, "found the file placed before the last process stopped", metadata: ["haul.path": "\(path)"])
        return true
    }

    /// A request curl finished without error: did every announced byte arrive?
    private func receivedResult() -> DownloadStateMachine.TransferResult {
        guard case .receiving = machine.state, let sink else { return .received }
        if let end = request.rangeEnd, sink.receivedLength == end {
            return .rangeEnded
        }
        if let total = record.totalBytes, sink.receivedLength != total {
            return .failed(
                DownloadError(
                    code: .sizeMismatch,
                    url: urlForErrors,
                    detail: "the body ended after \(sink.receivedLength) of \(total) bytes"
                )
            )
        }
        if record.totalBytes == nil {
            record.totalBytes = sink.receivedLength
        }
        return .received
    }

    /// The request on `connection` curl ended with `result` (not `CURLE_OK`), as the download's
    /// error: its stage from curl's codes and this transfer's own (``DownloadError/stage``), the
    /// proxy named when the address that could not be reached was the proxy's.
    func transportFailure(_ result: CURLcode, on connection: Connection) -> DownloadError {
        let (easy, stalledFor) = (connection.easy, connection.stalledFor)
        let target = connection === own ? request.target : segments?.target
        var message =
            stalledFor.map { "no data arrived for \($0) s (the stall timeout)" }
            ?? easy?.errorMessage ?? String(cString: curl_easy_strerror(result))
        var stage: DownloadError.TransportStage?
        if stalledFor != nil {
            stage = .stalled
        } else if result == CURLE_COULDNT_CONNECT
            || (result == CURLE_OPERATION_TIMEDOUT && easy?.madeConnection == false)
        {
            stage = .connecting
            // curl says which address it could not reach; only its message does (curl 7.88 has
            // no CURLINFO_USED_PROXY, and CURLINFO_PRIMARY_IP is empty when no connection was made).
            if let proxy = Self.proxyAddress(in: message, for: target ?? download.url) {
                message = "the proxy \(proxy) cannot be reached (\(message))"
                stage = .connectingToProxy
            }
        }
        var error = DownloadError(
            code: result == CURLE_PARTIAL_FILE ? .sizeMismatch : .transport,
            url: urlForErrors,
            curlCode: Int(result.rawValue),
            detail: message
        )
        error.stage = stage
        return error
    }

    /// The address curl failed to connect to (its message: "Failed to connect to HOST port PORT …")
    /// when it is not `url`'s: the proxy's. `nil` when it is the server's, or curl said otherwise.
    static func proxyAddress(in message: String, for url: URL) -> String? {
        let prefix = "Failed to connect to "
        guard message.hasPrefix(prefix) else { return nil }
        let words = message.dropFirst(prefix.count).split(separator: " ", maxSplits: 3)
        guard words.count >= 3, words[1] == "port", let port = Int(words[2].prefix { $0.isNumber }) else { return nil }
        let host = String(words[0])
        let bare = { (name: String) in name.lowercased().filter { $0 != "[" && $0 != "]" } }
        let urlPort = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        guard bare(host) != bare(url.host ?? "") || port != urlPort else {
            return nil
        }
        return "\(host):\(port)"
    }

    /// The form of `If-Range` the host of `target` honours: a CDN that ignored an ETag `If-Range`
    /// gets a date, or none (``IfRangeForm``).
    func ifRangeForm(for target: URL) -> IfRangeForm {
        environment.ifRangeForms.isEmpty ? .validator : environment.ifRangeForms[target.hostKey] ?? .validator
    }

    /// The `If-Range` value of the row's pin in `form` (``IfRangeForm``); `nil` for none.
    func ifRangeValue(_ form: IfRangeForm) -> String? {
        form.value(
            entityTag: record.entityTag,
            lastModified: record.lastModified,
            lastModifiedIsStrong: record.lastModifiedIsStrong
        )
    }

    /// `plan` for a body that goes to `stream`, whose bytes cannot be read back or taken back: a
    /// discarded body with nothing kept to check a resume with is counted again from its start; a
    /// decoded body of a `pinned` version is asked for from its start again, its answer read past
    /// the bytes the reader has when it is that version (``decideResponse(easy:)``); a stream that
    /// would have to start over otherwise fails now, before a request, saying why.
    static func plan(_ plan: ResumePlan, for stream: StreamTarget, pinned: Bool) throws(DownloadError) -> ResumePlan {
        switch plan {
        case .resume:
            return plan
        case .verify(let rangeStart, _, _):
            guard stream.discards, stream.acceptedBytes(from: rangeStart) == nil else { return plan }
            return .restart(.noValidator)
        case .restart(.decodedBody) where pinned:
            return plan
        case .restart(let reason):
            if let error = stream.cannotStartOver(because: reason) { throw error }
            return plan
        }
    }

    /// Empties the partial file and forgets what the row knew of the bytes that were in it, but its
    /// validators: they pin the version the download had, and an answer that replaces it must name
    /// its own version as strongly (``PinnedVersion``, ``ResponseDecision``), so that an error page
    /// sent as 200 after a restart is not taken for the new file.
    func emptyPartial(_ sink: FileSink) throws(DownloadError) {
        try sink.truncate()
        partialTruncated()
        dropSegments()
        record.totalBytes = nil
    }

    /// The partial file was emptied: syncs still running for it describe bytes that are gone.
    func partialTruncated() {
        record.bytesSynced = 0
        environment.syncs.truncated(id)
    }
}
