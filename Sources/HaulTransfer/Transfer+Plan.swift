import FoundationEssentials
import HaulIO
import HaulValues

extension Transfer {
    /// Readies the partial file for a request to `target` (`hop`: a redirect's), emptying it when
    /// `truncating` or when it cannot be continued, and decides what to ask for (``ResumePlan``),
    /// with the bytes an overlap check compares. Nil when every segment is whole.
    func readyPartial(
        truncating: Bool,
        hop: Redirect?,
        target: URL
    ) throws(DownloadError) -> (plan: ResumePlan, overlap: [UInt8]?)? {
        // The rest after a range that ended before the file, in this attempt: that answer's length.
        let continuesRange =
            request.rangeEnd.flatMap { end in self.sink?.receivedLength == end ? end - own.rangeStart : nil }
        var plan = ResumePlan.resume(from: 0, ifRange: nil)
        let sink: FileSink
        if let existing = self.sink {
            sink = existing
        } else if let stream {
            sink = FileSink(stream: stream, pool: environment.buffers)
        } else if let partialPath {
            sink = try FileSink(
                path: partialPath,
                pool: environment.buffers,
                openFiles: environment.openPartialFiles,
                startsEmpty: !record.mayHaveStarted
            )
        } else {
            // A body into a file has its row on disk, and so a partial file's path: never here.
            throw DownloadError(code: .internalError, url: urlForErrors, detail: "no partial file for a file")
        }
        self.sink = sink
        // Bytes on record as durable that the partial file no longer holds (removed or cut since:
        // a failed check deletes it) are not: a restart after a power cut would trust them.
        if record.bytesSynced > sink.committedLength { record.bytesSynced = sink.committedLength }
        let partialIsLongerThanFile =
            record.segments == nil && (record.totalBytes.map { sink.committedLength > $0 } ?? false)
        if truncating || partialIsLongerThanFile { try emptyPartial(sink) }
        if record.segments != nil, !restoreSegments() {
            // A map that cannot be continued: its bytes are not trusted.
            try emptyPartial(sink)
        }
        if segments != nil, hop == nil, !(try takeFirstSegmentLeft(sink)) { return nil }
        if lengthAtAttemptStart == nil { lengthAtAttemptStart = segmentedBytes ?? sink.committedLength }
        if let segment = segments?.segment(of: own) {
            // One segment, from where it stopped, of the version on record.
            plan = .resume(from: segment.next, ifRange: record.ifRangeValidator)
        } else if !revalidating {
            plan = ResumePlan.decide(
                offset: sink.receivedLength,
                validator: record.ifRangeValidator,
                // A URL moved to proves the partial's file by the overlap, validator or not; so
                // does a file the request continues, which Haul did not download.
                resumesWithoutValidator: environment.resumesWithoutValidator || machine.move != nil || provesByOverlap,
                continuesRange: continuesRange,
                decodesBodies: environment.easyHandles.options.decodesCompression,
                urlChanged: record.url != download.url.redactedString,
                // (A discarded body keeps nothing to splice onto: its plain range is not checked.)
                ifRangeIgnored: ifRangeForm(for: target) == .plainRange && stream?.discards != true
            )
        }
        if let stream { plan = try Self.plan(plan, for: stream, pinned: record.pinnedVersion != nil) }
        if case .verify(let rangeStart, _, _) = plan { return (plan, try sink.bytes(from: rangeStart)) }
        return (plan, nil)
    }

    /// Sets the own request's range for `plan` (`overlap`: the bytes a verifying resume compares)
    /// and returns the validator its If-Range pins, if any. A resume's If-Range is in the host's
    /// form (``IfRangeForm``), an unvalidated one's too: an If-Range a mirror ignored was asked
    /// again forever.
    func beginOwn(_ plan: ResumePlan, overlap: [UInt8]?, to target: URL) -> String? {
        switch plan {
        case .resume(let offset, let pin):
            // Over several connections, to the end of its segment.
            own.begin(
                from: offset,
                to: segments?.segment(of: own).map { $0.end - 1 },
                ifRange: ifRangeForm(for: target)
            )
            return pin
        case .verify(let rangeStart, _, let pin):
            own.begin(from: rangeStart, to: nil, ifRange: ifRangeForm(for: target))
            request.overlap = overlap
            return pin
        case .restart(let reason):
            // From 0; the answer replaces the partial once accepted (``decideResponse(easy:)``).
            own.begin(from: 0, to: nil, ifRange: .validator)
            request.restartReason = reason
            return nil
        }
    }
}
