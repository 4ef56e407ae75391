import CHaul
import Dispatch
import FoundationEssentials
import Glibc
import HaulIO
import HaulValues

/// The answer's head decided (``ResponseDecision``), the body accepted or refused, the file named.
extension Transfer {
    /// Reads the final response's head and feeds the machine its decision; a redirect is noted
    /// instead (``Request/isRedirect``), and followed once curl finished it.
    func decideResponse(easy: EasyHandle) -> DownloadStateMachine.BodyAction? {
        let status = easy.responseCode
        let redirects = Redirect.isRedirect(status: status) && easy.header("Location") != nil
        noteAnswer(easy, redirects: redirects)
        if redirects {
            request.isRedirect = true
            log(.debug, "redirect", metadata: ["haul.status": "\(status)"])
            return nil
        }
        // The version on record: a resume's answer must be of it, and an answer from byte 0 (a
        // restart) must name its own as strongly to replace it.
        let pinned = record.pinnedVersion
        let head = readHead(of: easy, status: status, pinned: pinned != nil)
        request.head = head
        spanAnswered(status: status)
        request.rangeEnd = ResponseDecision.rangeEnd(of: head)
        var decision = ResponseDecision.decide(
            head: head,
            requestedOffset: own.rangeStart,
            knownTotal: record.totalBytes,
            knownEntityTag: request.offset > 0 ? record.entityTag : nil,
            revalidating: revalidating,
            pinned: pinned,
            ifRange: (own.ifRangeForm, record.lastModifiedIsStrong && record.lastModified != nil)
        )
        // Retry-After only matters for a response that is retried (each header lookup walks them all).
        if !(200..<300).contains(head.status) {
            request.retryAfter = RetryPolicy.parseRetryAfter(easy.header("Retry-After"), now: clock.date)
        }
        log(
            .debug,
            "response",
            metadata: ["haul.status": "\(head.status)", "haul.decision": "\(decision)"]
        )
        // What the answer is of the version on record (`nil`: none is).
        let version = pinned?.match(entityTag: head.entityTag, lastModified: head.lastModified)
        if let reason = request.restartReason, case .append(let total) = decision {
            // A stream asked for a decoded body from its start again gets another version: that is
            // what it fails for (it cannot start over), not the decoding.
            let changed = stream != nil && reason == .decodedBody && version == .other
            decision = .replace(total: total, reason: changed ? .remoteChanged : reason)
        }
        if own.rangeLast != nil { decision = segmentDecision(head, otherwise: decision) }
        if holds(&decision, sameVersion: version == .same) { return nil }
        return feed(decision)
    }

    /// The final response's head as the decision (or a segment connection's judge) reads it. A
    /// decoded body's Content-Length counts encoded bytes, not the file's: none. `pinned`: a
    /// resume's or a restart's answer, whose type and Accept-Ranges tell an error page, or an
    /// ignored If-Range.
    func readHead(of easy: EasyHandle, status: Int, pinned: Bool) -> ResponseHead {
        var head = ResponseHead(
            status: status,
            contentRange: easy.header("Content-Range"),
            contentLength: easy.contentLength,
            entityTag: easy.header("ETag"),
            lastModified: easy.header("Last-Modified"),
            date: easy.header("Date"),
            contentEncoding: easy.header("Content-Encoding").flatMap { $0.lowercased() == "identity" ? nil : $0 },
            conflictingContentLengths: easy.conflictingValues(of: "Content-Length")
        )
        if head.contentEncoding != nil, environment.easyHandles.options.decodesCompression {
            head.contentLength = nil
            head.conflictingContentLengths = nil
        }
        if pinned {
            head.contentType = easy.header("Content-Type")
            head.acceptsRanges = easy.header("Accept-Ranges")?.lowercased() == "bytes"
        }
        return head
    }

    /// Whether `decision` waits on the answer's first bytes before it is fed (``Request/check``):
    /// bytes the download has, coming again from byte 0, read past; a whole file to a range it
    /// ignored, compared; a resume's overlap, compared. A resume whose announced length changed
    /// becomes a restart (`decision` changed).
    private func holds(_ decision: inout ResponseDecision, sameVersion: Bool) -> Bool {
        if case .replace(let total, let reason) = decision,
            let skip = repeatedBytes(total: total, reason: reason, sameVersion: sameVersion)
        {
            // The same file from byte 0 (the pinned version, or one whose overlap is compared next):
            // the bytes the download has (a stream's reader, a partial file) are dropped as they come
            // again, and the rest is appended.
            let check = OverlapCheck(decision: .append(total: total), readingPast: skip, overlap: request.overlap)
            request.check = check
            // Said of every byte on disk that comes again: those read past and those compared after them.
            let repeated = check.repeated
            log(
                .debug,
                "an answer from byte 0; reading past the bytes on disk",
                metadata: ["haul.bytes": "\(repeated)"]
            )
            events.publish(.warning(.repeatedBytesReadPast(repeated, reason: reason)))
            return true
        }
        if case .askAgain = decision, stream == nil, segmentedBytes == nil, let onDisk = sink?.receivedLength,
            onDisk > 0
        {
            // The whole file under the pinned ETag, to a range it ignored: asked again only while its
            // first bytes are the partial's. Ones that differ are another version behind the same
            // ETag (a changed file on a broken origin, or a cache in front of one), whatever the ETag
            // says: the download starts over (``compareOverlap(_:)``).
            // The host is asked in the next form from now on, whether or not the comparison ends: a
            // 200 with the ETag of the If-Range is either a host that ignores it or a file changed
            // under that ETag, and the next form checks the overlap either way.
            request.check = OverlapCheck(decision: decision, readingPast: min(onDisk, ResumePlan.overlapLength))
            request.overlap = nil  // this answer ends once compared; the next one checks its overlap
            rememberIfRangeForm(of: decision)
            return true
        }
        if request.overlap != nil {
            switch decision {
            case .append(let total?) where record.totalBytes != nil && total != record.totalBytes:
                decision = .retryFromZero(reason: .remoteChanged)
            case .append:
                // Appended only once the answer's first bytes are the partial's last ones.
                request.check = OverlapCheck(decision: decision, overlap: request.overlap)
                return true
            default:
                request.overlap = nil  // a whole file, a failure: nothing to compare
            }
        }
        return false
    }

    /// How many bytes of an answer from byte 0 repeat what the download has, when it may go on past
    /// them rather than start over: the server ignored `Range` (or a decoded body was asked for from
    /// its start again), the answer is long enough, and either the bytes before the resume point are
    /// compared first (an unvalidated resume's overlap; any download at a URL moved to, which must
    /// prove the partial and would be dropped otherwise), or it is the version the download is pinned
    /// to (`sameVersion`: its strong validator). For a stream, which cannot start over, and for a partial file, which
    /// keeps what it has (should this answer be cut short too, nothing is lost, and the next one may
    /// honour `Range`: two servers behind one name). A body discarded or in memory starts over
    /// otherwise, as does a file fetched in segments.
    private func repeatedBytes(total: Int64?, reason: RestartReason, sameVersion: Bool) -> Int64? {
        let onDisk = sink?.receivedLength ?? 0
        guard reason == .rangeIgnored || reason == .decodedBody, onDisk > 0, total.map({ $0 >= onDisk }) ?? true
        else { return nil }
        let keepsOnDisk = stream.map { !$0.discards } ?? (segmentedBytes == nil)
        if request.overlap != nil, reason == .rangeIgnored, machine.move != nil || keepsOnDisk { return own.rangeStart }
        return keepsOnDisk && sameVersion ? onDisk : nil
    }

    /// Gives the machine a decision on the response (vetted, for a URL the download moved to).
    func feed(_ decision: ResponseDecision) -> DownloadStateMachine.BodyAction {
        var decision = vet(decision)
        // A stream's bytes cannot be taken back: one that would start over fails now, saying why.
        switch decision {
        case .retryFromZero(let reason), .replace(_, let reason):
            if let error = stream?.cannotStartOver(because: reason) { decision = .rejectURL(attributed(error)) }
        default:
            break
        }
        let action = machine.responseReceived(decision)
        switch decision {
        case .retryFromZero(let reason):
            guard case .closing(.restartFromZero) = machine.state else { break }
            restarted(because: reason, discarding: bytesOnDisk)
        case .askAgain:
            rememberIfRangeForm(of: decision)
        case .unproven(let detail):
            log(.debug, "an answer that does not prove it is the file", metadata: ["haul.reason": "\(detail)"])
        default:
            break
        }
        return action
    }

    /// The host ignored this If-Range (`decision` is ``ResponseDecision/askAgain(_:)``): it is asked
    /// in the next form from now on.
    private func rememberIfRangeForm(of decision: ResponseDecision) {
        guard case .askAgain(let form) = decision else { return }
        let host = (request.target ?? download.url).hostKey
        guard environment.ifRangeForms[host] != form else { return }
        environment.ifRangeForms[host] = form
        log(.debug, "the server ignored If-Range; asking again", metadata: ["haul.if-range": "\(form)"])
    }

    /// The download starts over: `discarded` bytes it had will come again.
    func restarted(because reason: RestartReason, discarding discarded: Int64) {
        environment.metrics.restarted(reason).increment()
        environment.metrics.bytesResent.increment(by: discarded)
        log(.debug, "restarting from zero", metadata: ["haul.reason": "\(reason)"])
        events.publish(.restarted(reason))
    }

    /// The response was accepted: check what it announces, empty the partial file when the body
    /// starts from zero, and take the response's validators into the row.
    func acceptBody(total: Int64?, truncating: Bool, restart: RestartReason?) {
        guard let sink, let head = request.head else { return }
        environment.metrics.timeToFirstByte.recordNanoseconds(DispatchTime.now().uptimeNanoseconds - request.startedAt)
        download.ledger.withLock { $0.bodyStarted() }
        request.head = nil  // read once
        if let total, let refusal = refusal(ofAnnounced: total) {
            bodyFailed(refusal)
            return
        }
        // A body in memory gets its room at once.
        if let total, let collector = stream?.collector { collector.expect(total) }
        let discarded = sink.receivedLength
        if truncating {
            do {
                try sink.truncate()
                partialTruncated()
                dropSegments()
            } catch {
                bodyFailed(attributed(error))
                return
            }
        }
        if record.awaitsName, let easy = own.easy, !chooseFileName(easy) { return }
        machine.moveProven()  // its answer continues the partial
        record.attempts += 1
        followURL()
        if let easy = own.easy { recordResponse(head, total: total, over: easy) }
        if let restart { restarted(because: restart, discarding: discarded) }
        if let encoding = head.contentEncoding, !environment.easyHandles.options.decodesCompression {
            log(
                .debug,
                "an encoded body nobody asked for is saved as sent",
                metadata: ["haul.encoding": "\(encoding)"]
            )
            events.publish(.warning(.unrequestedContentEncoding(encoding)))
        }
        // A whole file, or one whose overlap matched: this answer's validators vouch for the partial.
        if truncating || own.rangeStart < request.offset || request.offset == 0 {
            record.entityTag = head.entityTag
            record.lastModified = head.lastModified
            record.lastModifiedIsStrong = HTTPDate.isStrong(lastModified: head.lastModified, date: head.date)
        }
        // A stream cannot be read back: it keeps its last bytes, which a resume checks the answer
        // with (no validator to pin the version, another URL the next answer may come from, or an
        // answer from byte 0 read past that must repeat them, whatever its validator says).
        stream?.keepTail(Int(ResumePlan.overlapLength))
        if total != nil || truncating {
            record.totalBytes = total
        }
        planSegments(
            total: total,
            head: head,
            acceptsRanges: own.easy?.header("Accept-Ranges")?.lowercased() == "bytes"
        )
        if let total, !prepare(sink, for: total) { return }
        guard writesRowBeforeBody() else { return }
        events.publish(.receiving(progress()))
    }

    /// Why a body of `total` bytes, as announced, is refused before any of it is written: not the
    /// size the request expects, or larger than the largest file accepted. Nil when it is not.
    private func refusal(ofAnnounced total: Int64) -> DownloadError? {
        if let expected = record.expectedSize, total != expected {
            return DownloadError(
                code: .checksumMismatch,
                url: urlForErrors,
                detail: "the server announced \(total) bytes where \(expected) were expected"
            )
        }
        if let maximum = maximumSize, total > maximum {
            return tooLarge("the file is \(total) bytes, more than the maximum of \(maximum)")
        }
        return nil
    }

    /// The accepted answer, for ``Download/response``: the URL this request went to (the
    /// download's, a mirror's or where a redirect led: Haul follows redirects itself, so it is
    /// curl's effective URL, without a copy of curl's text kept by every live transfer; its
    /// credentials are removed when read, off the loop's per-file path).
    private func recordResponse(_ head: ResponseHead, total: Int64?, over easy: EasyHandle) {
        download.record(
            ResponseRecord(
                url: request.target ?? download.url,
                status: head.status,
                contentType: easy.header("Content-Type"),
                entityTag: head.entityTag,
                lastModified: head.lastModified,
                totalBytes: total,
                // A body in memory, a stream: its reader may want them; not a discarded body
                // (a load test's: no cost per body for what nobody reads) nor a file.
                packedHeaders: stream.map { !$0.discards || $0.collector != nil } == true
                    ? easy.responseHeaders() : PackedHeaders()
            )
        )
    }

    /// Readies `sink` for the `total` bytes announced: a body that fits in the buffer is collected
    /// there whole (one write, by the disk thread); a file larger than its buffer reserves its
    /// blocks now (a disk too small fails at the start). False when the body failed.
    private func prepare(_ sink: FileSink, for total: Int64) -> Bool {
        if segments == nil, total - sink.receivedLength <= Int64(environment.buffers.bufferSize) {
            sink.collectsWholeRest()
        }
        if environment.preallocatesFiles, total > sink.receivedLength + Int64(environment.buffers.bufferSize) {
            do {
                try sink.preallocate(total)
            } catch {
                bodyFailed(attributed(error))
                return false
            }
        }
        return true
    }

    /// Writes the row with this answer's validators when the machine says (``RowTiming``): at once,
    /// just before the first byte reaches the partial file, or when the transfer is set aside. False
    /// when the row could not be written (the transfer ended).
    private func writesRowBeforeBody() -> Bool {
        guard let sink else { return false }
        let timing = machine.answerAccepted(
            rowInMemory: store.isInMemory,
            segmented: segments != nil,
            bytesOnDisk: sink.committedLength
        )
        switch timing {
        case .whenSetAside:
            break
        case .now:
            guard catchUpRow() else { return false }
            if let segments {
                // The other connections go where this answer came from (after redirects), once the
                // row (validators, map) is written: they write their segments from this turn's end.
                (segments.target, segments.sendsHeaders) = (request.target ?? download.url, request.sendsHeaders)
                askForConnections()
            }
        case .beforeFirstWrite:
            sink.beforeFirstWrite = { [unowned self] () throws(DownloadError) in
                _ = catchUpRow()
                if let error = own.error { throw error }
            }
        }
        return true
    }

    /// Names the file of a download into a folder, from this answer (``ServerFileName``), before its
    /// first byte is written: the first free one of `name`, `name.1`, `name.2`… (free: nothing is
    /// there, no running download chose it, and no row of the journal holds it). The row records it
    /// with the response's validators. Returns `false` when the download failed instead.
    func chooseFileName(_ easy: EasyHandle) -> Bool {
        guard let folder = record.folder else { return true }
        let name = ServerFileName.choose(contentDisposition: easy.header("Content-Disposition"), url: easy.effectiveURL)
        var status = stat()
        let free: String?
        do {
            free = try ServerFileName.firstFree(name, in: folder) { path throws(DownloadError) in
                if environment.claimedNames.contains(path) || lstat(path, &status) == 0 { return true }
                return try store.destinationIsTaken(path, except: id)
            }
        } catch {
            bodyFailed(attributed(error))
            return false
        }
        guard let path = free else {
            let last = ServerFileName.numbered(name, ServerFileName.lastCounter)
            bodyFailed(
                DownloadError(
                    code: .fileSystem,
                    url: urlForErrors,
                    errno: EEXIST,
                    path: "\(folder)/\(name)",
                    detail: "every name from '\(name)' to '\(last)' is taken"
                )
            )
            return false
        }
        environment.claimedNames.insert(path)
        record.destination = path
        download.update(destinationPath: path)
        log(.debug, "file named by the server", metadata: ["haul.path": "\(path)"])
        return true
    }
}
