import CHaul
import Dispatch

extension Transfer {
    /// curl's write callback: the first call decides on the response; later calls append.
    static let writeCallback: CHaul_data_callback = { pointer, size, count, context in
        let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
        return transfer.receive(UnsafeRawBufferPointer(start: pointer, count: size * count))
    }

    /// Takes a chunk of the body: how many bytes were taken (fewer makes curl end the transfer).
    /// Runs inside curl's callback: touches the file, the journal and events, never the multi handle.
    func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        if case .connecting = machine.state {
            guard let easy else { return Self.refused }
            _ = perform(decideResponse(easy: easy))  // accepted: receiving; refused: closing
        }
        guard case .receiving = machine.state, let sink else { return Self.refused }
        if let maximum = environment.maximumFileSize, sink.receivedLength + Int64(bytes.count) > maximum {
            bodyFailed(
                DownloadError(
                    code: .fileTooLarge,
                    url: urlForErrors,
                    detail: "the body grew past the maximum of \(maximum) bytes"
                )
            )
            return Self.refused
        }
        do {
            let now = DispatchTime.now().uptimeNanoseconds
            if try sink.append(bytes, now: now) {
                reportProgress(now: now)
            }
        } catch {
            bodyFailed(attributed(error))
            return Self.refused
        }
        return bytes.count
    }

    /// What curl's write callback returns to refuse a body (`CURL_WRITEFUNC_ERROR`).
    private static let refused = Int(0xFFFF_FFFF)

    /// Reads the final response's head and feeds the machine its decision.
    func decideResponse(easy: EasyHandle) -> DownloadStateMachine.Action {
        let head = ResponseHead(
            status: easy.responseCode,
            contentRange: easy.header("Content-Range"),
            contentLength: easy.contentLength,
            entityTag: easy.header("ETag"),
            lastModified: easy.header("Last-Modified"),
            conflictingContentLengths: easy.conflictingValues(of: "Content-Length")
        )
        request.head = head
        request.rangeEnd = ResponseDecision.rangeEnd(of: head)
        let decision = ResponseDecision.decide(
            head: head,
            requestedOffset: request.offset,
            knownTotal: record.totalBytes,
            knownEntityTag: request.offset > 0 ? record.entityTag : nil,
            revalidating: revalidating
        )
        // Retry-After only matters for a response that is retried (each header lookup walks them all).
        if !(200..<300).contains(head.status) {
            request.retryAfter = RetryPolicy.parseRetryAfter(easy.header("Retry-After"))
        }
        environment.logger.debug(
            "response",
            metadata: ["url": "\(urlForErrors)", "status": "\(head.status)", "decision": "\(decision)"]
        )
        let action = machine.responseReceived(decision)
        if case .retryFromZero(let reason) = decision, case .closing(.restartFromZero) = machine.state {
            restarted(because: reason)
        }
        return action
    }

    private func restarted(because reason: RestartReason) {
        environment.logger.info("restarting from zero", metadata: ["url": "\(urlForErrors)", "reason": "\(reason)"])
        download.hub.publish(.restarted(reason))
    }

    /// The response was accepted: check what it announces, empty the partial file when the body
    /// starts from zero, and take the response's validators into the row.
    func acceptBody(total: Int64?, truncating: Bool, restart: RestartReason?) {
        guard let sink, let head = request.head else { return }
        request.head = nil  // read once
        if let total, let expected = record.expectedSize, total != expected {
            bodyFailed(
                DownloadError(
                    code: .checksumMismatch,
                    url: urlForErrors,
                    detail: "the server announced \(total) bytes where \(expected) were expected"
                )
            )
            return
        }
        if let total, let maximum = environment.maximumFileSize, total > maximum {
            bodyFailed(
                DownloadError(
                    code: .fileTooLarge,
                    url: urlForErrors,
                    detail: "the file is \(total) bytes, more than the maximum of \(maximum)"
                )
            )
            return
        }
        if truncating {
            do {
                try sink.truncate()
                partialTruncated()
            } catch {
                bodyFailed(attributed(error))
                return
            }
        }
        record.attempts += 1
        if let restart { restarted(because: restart) }
        if truncating || request.offset == 0 {
            record.entityTag = head.entityTag
            record.lastModified = head.lastModified
        }
        if total != nil || truncating {
            record.totalBytes = total
        }
        // A resume trusts the row's validators for the bytes in the partial file, so the row must have
        // this response's before any of its bytes is written there. Until then it can wait: a download
        // that ends inside its buffer writes its row once, at completion, instead of twice.
        rowBehind = true
        if sink.committedLength > 0 {
            guard catchUpRow() else { return }
        } else {
            sink.beforeFirstWrite = { [unowned self] () throws(DownloadError) in
                _ = catchUpRow()
                if let error = request.bodyError { throw error }
            }
        }
        download.hub.publish(.receiving(progress()))
    }

    /// Writing the body failed here: the machine ends the request (curl is refused the next chunk),
    /// and bytes still buffered for it are not written (the first error is the one reported).
    func bodyFailed(_ error: DownloadError) {
        if request.bodyError == nil { request.bodyError = error }
        _ = machine.bodyFailed(error)
    }

    /// Reports progress, at most once per progress interval.
    func reportProgress(now: UInt64) {
        guard let sink else { return }
        speed.record(bytes: sink.committedLength, at: now)
        guard now &- lastProgressAt >= environment.progressInterval else { return }
        lastProgressAt = now
        download.hub.publish(.progress(progress()))
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
