import HaulValues

/// What to do with a response, decided from its head alone. Pure: unit-tested without I/O.
enum ResponseDecision: Equatable, Sendable {
    /// Append the body to the partial file, which already holds `requestedOffset` bytes.
    case append(total: Int64?)
    /// This response carries the whole file from byte 0: truncate the partial, then write the body.
    case replace(total: Int64?, reason: RestartReason)
    /// The partial file already holds the whole file; nothing more to receive.
    case alreadyComplete(total: Int64)
    /// The complete file at the destination is current (a revalidation's 304): keep it.
    case notModified(total: Int64)
    /// The response cannot be used: drop it, truncate the partial, and ask again without a range.
    case retryFromZero(reason: RestartReason)
    /// The download fails with this HTTP status.
    case fail(status: Int)
    /// The response is not valid HTTP (what is wrong with it): the download fails, keeping its partial.
    case invalid(String)
    /// The answer of a URL the download moved to (a mirror, a fresh URL) is another file than the
    /// partial's: that URL is dropped, and the download goes on as the failure that made it move says.
    case rejectURL(DownloadError)
    /// The answer does not prove it is the file (why): it lacks the validator the download is pinned
    /// to (``PinnedVersion``), or the validator and length a new version must show. A failed attempt,
    /// retried with a backoff; nothing on disk is replaced.
    case unproven(String)
    /// The server answered a range pinned with an ETag `If-Range` by the whole file with that same
    /// ETag: it ignored the `If-Range`. Drop the body and ask for the same range in this form.
    case askAgain(IfRangeForm)

    /// Where the body of `head` ends when it is a 206 for a range that stops before the end of a
    /// file of known length (`last + 1`); `nil` for an answer that runs to the end.
    static func rangeEnd(of head: ResponseHead) -> Int64? {
        guard head.status == 206, let value = head.contentRange,
            case .range(_, let last, let total?)? = ContentRange(value), last < total - 1
        else { return nil }
        return last + 1
    }

    /// Decides what to do with `head`, the answer to a request for bytes from `requestedOffset` on.
    ///
    /// - Parameters:
    ///   - head: the final response's status and headers.
    ///   - requestedOffset: the partial file's length, sent as `Range: bytes=N-` when above 0.
    ///   - knownTotal: the file's length as recorded from an earlier response, if any.
    ///   - knownEntityTag: the ETag recorded with the partial, if any.
    ///   - revalidating: the request was conditional on the complete file having changed.
    ///   - pinned: the version the row is pinned to (``PinnedVersion``), if any: a resume's answer that
    ///     does not carry its validator is ``unproven(_:)``, not a new version; an answer from byte 0
    ///     (a restart, whose partial was emptied) must carry a validator of its kind and a length.
    ///   - ifRange: the form of `If-Range` the request was sent with (``IfRangeForm``), and whether the
    ///     file has a strong date to try next.
    static func decide(
        head: ResponseHead,
        requestedOffset: Int64,
        knownTotal: Int64?,
        knownEntityTag: String? = nil,
        revalidating: Bool = false,
        pinned: PinnedVersion? = nil,
        ifRange: (form: IfRangeForm, hasStrongDate: Bool) = (.validator, false)
    ) -> ResponseDecision {
        if revalidating && head.status == 304, let knownTotal { return .notModified(total: knownTotal) }
        let weaklyOther = (200...299).contains(head.status) && pinned.map(head.namesAnotherVersionWeakly) == true
        let changed: Bool = {
            if let knownEntityTag, let tag = head.entityTag, tag != knownEntityTag { return true }
            return requestedOffset > 0
                && (weaklyOther || pinned?.match(entityTag: head.entityTag, lastModified: head.lastModified) == .other)
        }()
        if (200...299).contains(head.status), let lengths = head.conflictingContentLengths {
            return .invalid(
                "the server announced different lengths (Content-Length: \(lengths.joined(separator: ", ")))"
            )
        }
        if (200...299).contains(head.status), head.status != 206 || requestedOffset == 0 {
            // A body from byte 0 that would replace pinned bytes, or stand for a changed file, must
            // name its version as strongly as the pin did, and another version its length too (or
            // be a file server's answer for another version named weakly, which replaces them:
            // ``ResponseHead/namesAnotherVersionWeakly(than:)``). The pinned version itself needs
            // no length (a decoded body, a chunked one has none).
            if let pinned, !weaklyOther,
                !head.names(pinned.kind)
                    || head.contentLength == nil
                        && pinned.match(entityTag: head.entityTag, lastModified: head.lastModified) != .same
            {
                return .unproven(
                    PinnedVersion.unprovenDetail(
                        kind: pinned.kind,
                        contentType: head.contentType,
                        length: head.contentLength,
                        namesVersion: head.names(pinned.kind)
                    )
                )
            }
        }
        if requestedOffset > 0, let pinned {
            let match = pinned.match(entityTag: head.entityTag, lastModified: head.lastModified)
            if head.status == 206, match == .unproven, ifRange.form == .plainRange {
                // Without If-Range, only the validator proves that the range is of the pinned version.
                return .unproven(
                    PinnedVersion.unprovenDetail(kind: pinned.kind, contentType: head.contentType, length: nil)
                )
            }
            if head.status == 200, match == .same, head.acceptsRanges, head.contentLength == knownTotal,
                let next = ifRange.form.next(hasStrongDate: ifRange.hasStrongDate)
            {
                return .askAgain(next)
            }
        }
        switch head.status {
        case 206:
            return decidePartial(head, requestedOffset: requestedOffset, knownTotal: knownTotal, changed: changed)
        case 200...299:
            if requestedOffset == 0 { return .append(total: head.contentLength) }
            let reason: RestartReason =
                changed || (knownTotal != nil && head.contentLength != nil && head.contentLength != knownTotal)
                ? .remoteChanged : .rangeIgnored
            return .replace(total: head.contentLength, reason: reason)
        case 416:
            return decideUnsatisfiable(head, requestedOffset: requestedOffset, knownTotal: knownTotal, changed: changed)
        default:
            return .fail(status: head.status)
        }
    }

    /// A 206: appended when its range starts at the offset asked for, of the file on record
    /// (`changed`: another version's validator).
    private static func decidePartial(
        _ head: ResponseHead,
        requestedOffset: Int64,
        knownTotal: Int64?,
        changed: Bool
    ) -> ResponseDecision {
        guard let value = head.contentRange, case .range(let first, let last, let total)? = ContentRange(value)
        else {
            return .retryFromZero(reason: .rangeMismatch)
        }
        if changed { return .retryFromZero(reason: .remoteChanged) }
        if let total, let knownTotal, total != knownTotal, requestedOffset > 0 {
            return .retryFromZero(reason: .remoteChanged)
        }
        guard first == requestedOffset else { return .retryFromZero(reason: .rangeMismatch) }
        // A range that ends before the file (a server that limits the size of its answers) is
        // appended too, and the rest asked for when it ends (see ``rangeEnd(of:)``), if its
        // Content-Length says the same: curl stops the body there, never past the range.
        if rangeEnd(of: head) != nil, head.contentLength != last - first + 1 {
            return .retryFromZero(reason: .rangeMismatch)
        }
        return .append(total: total ?? head.contentLength.map { requestedOffset + $0 })
    }

    /// A 416 to a resume: the file is complete when the length it announces (or the one on record)
    /// is the partial's, of the same version; else it starts over.
    private static func decideUnsatisfiable(
        _ head: ResponseHead,
        requestedOffset: Int64,
        knownTotal: Int64?,
        changed: Bool
    ) -> ResponseDecision {
        guard requestedOffset > 0 else { return .fail(status: 416) }
        var total = knownTotal
        if let value = head.contentRange, case .unsatisfied(let announced)? = ContentRange(value) {
            if let knownTotal, knownTotal != announced { return .retryFromZero(reason: .remoteChanged) }
            total = announced
        }
        if let total, total == requestedOffset, !changed { return .alreadyComplete(total: total) }
        return .retryFromZero(reason: changed ? .remoteChanged : .rangeNotSatisfiable)
    }
}
