import CHaul
import Dispatch
import FoundationEssentials
import Glibc

/// A download fetched over several connections (``DownloadManager/Configuration/connectionsPerFile``):
/// its ``SegmentMap``, the connections beyond the transfer's own request, and where they go. Made
/// only for such a download, when an answer shows that its server honours ranges for a file of known
/// length and strong validator (``Transfer/planSegments(total:)``), or when a resumed download's row
/// holds a map. Loop thread only.
final class Segments {
    var map: SegmentMap
    /// How many connections the download may use at once: fewer after one of them failed while
    /// others went on (a server that refuses more connections than it allows per client).
    var connections: Int
    /// No segment is made smaller than this.
    let minimumSize: Int64
    /// The connections beyond the transfer's own request.
    var fetches: [SegmentFetch] = []
    /// The start of the segment the transfer's own request writes, while it writes one.
    var primaryStart: Int64? {
        didSet { if primaryStart != nil { primarySince = (DispatchTime.now().uptimeNanoseconds, primaryWritten) } }
    }
    /// When the transfer's own request began on its segment, and the segment's bytes then.
    var primarySince: (at: UInt64, written: Int64) = (0, 0)
    private var primaryWritten: Int64 {
        primaryStart.flatMap { map.index(startingAt: $0) }.map { map.segments[$0].written } ?? 0
    }
    /// Where the other connections send their requests: the URL whose answer was accepted (after
    /// redirects), with the download's headers only when it is the download's origin.
    var target: URL
    var sendsHeaders: Bool

    init(map: SegmentMap, connections: Int, minimumSize: Int64, target: URL, sendsHeaders: Bool) {
        self.map = map
        self.connections = connections
        self.minimumSize = minimumSize
        self.target = target
        self.sendsHeaders = sendsHeaders
    }

    /// The segments a connection fetches now.
    var owned: Set<Int64> {
        var starts = Set(fetches.map(\.start))
        if let primaryStart { starts.insert(primaryStart) }
        return starts
    }

    /// The segment the next connection fetches: one nobody fetches, else the second half of the
    /// largest one left (aria2's dynamic split) whose connection would take more than a second to
    /// finish it alone; `nil` when no piece is worth a connection.
    func nextSegment(now: UInt64) -> Int? {
        if let index = map.firstUnowned(owned) { return index }
        return map.splitLargest(minimumSize: minimumSize) { worthSplitting($0, now: now) }
    }

    /// Whether a new connection would find a segment to fetch (without splitting one yet).
    func hasWorkForAnotherConnection(now: UInt64) -> Bool {
        if map.firstUnowned(owned) != nil { return true }
        return map.segments.contains { $0.remaining >= 2 * max(1, minimumSize) && worthSplitting($0, now: now) }
    }

    /// The time a connection has had for its segment before its speed tells whether to split it.
    static let measuredAfter: UInt64 = 200_000_000  // nanoseconds
    /// A segment its connection finishes within this time is left to it: a split would cut that
    /// connection while bytes it was sent are still in flight (a fast server's socket buffers hold
    /// megabytes), and a new connection costs a handshake.
    static let worthASplit: Double = 1  // seconds

    /// Whether `segment`'s connection would take more than ``worthASplit`` to fetch the rest alone,
    /// at the speed it has had since its request went out.
    private func worthSplitting(_ segment: SegmentMap.Segment, now: UInt64) -> Bool {
        let since: (at: UInt64, written: Int64)
        if segment.start == primaryStart {
            since = primarySince
        } else if let fetch = fetches.first(where: { $0.start == segment.start }) {
            since = (fetch.requestedAt, fetch.writtenAtRequest)
        } else {
            return true
        }
        let elapsed = now &- since.at
        guard elapsed >= Self.measuredAfter else { return false }
        let speed = Double(segment.written - since.written) / (Double(elapsed) / 1e9)
        return Double(segment.remaining) > speed * Self.worthASplit
    }
}

/// One connection of a download fetched over several, beyond the transfer's own request: it fetches
/// one segment at a time with `Range: bytes=a-b` and `If-Range`, into a ``FileSink`` of its own at the
/// segment's place in the partial file. Its answer must be the file the transfer fetches (length and
/// validator). Owned by its transfer's ``Segments``; loop thread only.
final class SegmentFetch {
    unowned let transfer: Transfer
    /// The start of the segment it fetches (a segment's identity in the map).
    var start: Int64
    let sink: FileSink
    var easy: EasyHandle?
    /// Its answer was checked and is the transfer's file.
    var answered = false
    /// Its segment is whole: what the server still sends is not wanted (a split shortened it).
    var ended = false
    /// Its answer is another version of the file.
    var changed: RestartReason?
    /// Why its answer was refused, once it was.
    var error: DownloadError?
    /// curl holds it paused for the rate limiter.
    var parkedByLimiter = false
    /// The form of its `If-Range` (``IfRangeForm``), and whether its answer showed that the server
    /// ignores that form: the same range is asked again in the next one.
    var ifRangeForm = IfRangeForm.validator
    var asksAgain = false
    /// Its bytes when they last changed, and when: what tells a stall (``Transfer/stalledRequests(now:after:)``).
    var stallMark: (bytes: Int64, since: UInt64)?
    /// When its request went out (uptime nanoseconds), and its segment's bytes then: its speed.
    var requestedAt: UInt64 = 0
    var writtenAtRequest: Int64 = 0

    init(transfer: Transfer, start: Int64, sink: FileSink) {
        self.transfer = transfer
        self.start = start
        self.sink = sink
    }

    static let writeCallback: CHaul_data_callback = { pointer, size, count, context in
        let fetch = Unmanaged<SegmentFetch>.fromOpaque(context!).takeUnretainedValue()
        return fetch.transfer.receive(UnsafeRawBufferPointer(start: pointer, count: size * count), for: fetch)
    }

    /// The rate limiter unpauses it: curl gives the chunk it kept again.
    func unparked() {
        guard parkedByLimiter, let easy else { return }
        parkedByLimiter = false
        let code = curl_easy_pause(easy.raw, 0)  // CURLPAUSE_CONT: the kept chunk is given again now
        if code != CURLE_OK { transfer.environment.refusedWhenUnpaused.append((easy.raw, code)) }
    }
}

extension Transfer {
    /// How many connections this download may use.
    var connectionsAllowed: Int { min(64, max(1, record.connections ?? environment.connectionsPerFile)) }

    /// Its connections in curl now: its own request and its segments' others.
    var liveConnections: Int { (easy != nil ? 1 : 0) + (segments?.fetches.count ?? 0) }

    /// Whether another connection would have work now (the scheduler grants it, ``Admission``).
    var wantsConnection: Bool {
        guard let segments, case .receiving = machine.state, !awaitingHeaders,
            liveConnections < segments.connections
        else { return false }
        return segments.hasWorkForAnotherConnection(now: DispatchTime.now().uptimeNanoseconds)
    }

    /// Asks the scheduler for more connections at the end of this loop turn, if they have work.
    func askForConnections() {
        if wantsConnection { environment.wantingConnections[id] = self }
    }

    // MARK: planning

    /// The accepted answer announced `total` bytes: split the file when the download may use several
    /// connections, the server honours ranges (a 206, or a 200 with `Accept-Ranges: bytes`), the
    /// answer carries a strong validator (every segment's answer is checked against it), and the
    /// bytes left are at least two minimum segments. Runs before the answer's first byte is written.
    func planSegments(total: Int64?, head: ResponseHead, acceptsRanges: Bool) {
        guard segments == nil, !segmentsRefused, connectionsAllowed > 1, let total, let sink, !revalidating,
            urls.isEmpty, head.status == 206 || (head.status == 200 && acceptsRanges), request.rangeEnd == nil,
            record.ifRangeValidator != nil, head.contentEncoding == nil,
            total - sink.receivedLength >= 2 * environment.minimumSegmentSize
        else { return }
        let map = SegmentMap.plan(
            total: total,
            connections: connectionsAllowed,
            minimumSize: environment.minimumSegmentSize,
            written: sink.receivedLength
        )
        guard map.segments.count > 1 else { return }
        let made = Segments(
            map: map,
            connections: connectionsAllowed,
            minimumSize: environment.minimumSegmentSize,
            target: request.target ?? download.url,
            sendsHeaders: request.sendsHeaders
        )
        made.primaryStart = 0
        segments = made
        record.segments = map.encoded
        log(
            .debug,
            "split over connections",
            metadata: [
                "haul.segments": "\(map.segments.count)", "haul.total": "\(total)",
            ]
        )
    }

    /// A resumed download whose row holds a map: its segments again, the transfer's own request
    /// taking the first one left. A map that does not fit the row (or a URL that changed: the other
    /// URL's file is not proven yet) is dropped, and with it the partial's bytes.
    func restoreSegments() -> Bool {
        guard segments == nil, let text = record.segments else { return true }
        guard !revalidating, moved == nil, record.url == download.url.redactedString, urls.isEmpty,
            let total = record.totalBytes, record.ifRangeValidator != nil,
            let map = SegmentMap(encoded: text, total: total)
        else {
            record.segments = nil
            return false
        }
        let restored = Segments(
            map: map,
            connections: max(1, connectionsAllowed),
            minimumSize: environment.minimumSegmentSize,
            target: download.url,
            sendsHeaders: true
        )
        segments = restored
        return true
    }

    /// The first request of an attempt of a segmented download: the transfer's own request takes the
    /// first segment no connection fetches, and its sink moves there. Returns `false` when every
    /// segment is whole (nothing to ask for).
    func takeFirstSegmentLeft(_ sink: FileSink) throws(DownloadError) -> Bool {
        guard let segments else { return true }
        segments.primaryStart = nil
        guard let index = segments.map.firstUnowned(segments.owned) else { return false }
        let segment = segments.map.segments[index]
        try sink.move(to: segment.next)
        segments.primaryStart = segment.start
        return true
    }

    /// The decision on an answer to the transfer's own request for one segment: the same file (a 206
    /// from the asked byte with the same length and validator) is appended; another version (another
    /// validator of the pin's kind), or the whole file, starts over; an answer that names no version
    /// (an error page as 200) is a failed attempt; any other answer is decided as usual.
    func segmentDecision(_ head: ResponseHead, otherwise decision: ResponseDecision) -> ResponseDecision {
        guard let segments, let pin = record.pinnedVersion else { return decision }
        let match = pin.match(entityTag: head.entityTag, lastModified: head.lastModified)
        guard (200...299).contains(head.status) else { return decision }
        if match == .unproven {
            return .unproven(
                PinnedVersion.unprovenDetail(kind: pin.kind, contentType: head.contentType, length: head.contentLength)
            )
        }
        if match == .other { versionsDiffered() }
        switch head.status {
        case 206:
            guard case .range(let first, _, let total)? = head.contentRange.flatMap(ContentRange.init),
                total == segments.map.total, match == .same
            else { return .retryFromZero(reason: .remoteChanged) }
            guard first == request.rangeStart else { return .retryFromZero(reason: .rangeMismatch) }
            return .append(total: total)
        case 200:
            let ignored = match == .same && head.contentLength == segments.map.total
            if ignored { segmentsRefused = true }
            return .replace(total: head.contentLength, reason: ignored ? .rangeIgnored : .remoteChanged)
        default:
            return decision
        }
    }

    /// Connections of this download were answered with different versions of the file. At the
    /// second time (two servers behind one name, each with its own version, as a load balancer
    /// spreads connections), the download goes on over one connection, on one version, and says why.
    func versionsDiffered() {
        versionConflicts += 1
        guard versionConflicts == 2, !segmentsRefused else { return }
        segmentsRefused = true
        log(.debug, "connections got different versions of the file; one connection from now on")
        download.hub.publish(.warning(.versionsDiffer))
    }

    /// Forgets the segments (the partial is emptied): their connections stop.
    func dropSegments() {
        stopFetches()
        segments = nil
        record.segments = nil
    }

    // MARK: bytes

    /// Bytes received and still in a sink's buffer, by the start of their segment.
    private var pendingBytes: [Int64: Int64] {
        guard let segments else { return [:] }
        var pending: [Int64: Int64] = [:]
        if let start = segments.primaryStart, let sink { pending[start] = Int64(sink.bufferedCount) }
        for fetch in segments.fetches { pending[fetch.start, default: 0] += Int64(fetch.sink.bufferedCount) }
        return pending
    }

    /// The map of the bytes handed to the kernel (buffered ones left out): what the journal says.
    var committedMap: SegmentMap? { segments.map { $0.map.withoutPending(pendingBytes) } }

    /// Bytes written to the partial file over all segments.
    var segmentedBytes: Int64? { committedMap?.bytesWritten }

    /// A sink of a segment handed bytes to the kernel: the row says so at once (in this loop turn's
    /// transaction), so that a killed process re-fetches at most a buffer per connection.
    func segmentBytesWritten() {
        guard let map = committedMap else { return }
        record.segments = map.encoded
        record.bytesCommitted = map.bytesWritten
        writeRow()
    }

    /// The transfer's own request takes `bytes` for its segment: the bytes that fit in it, and
    /// whether the segment is whole with bytes left over (the rest of the answer is not wanted).
    func clipToPrimarySegment(_ bytes: UnsafeRawBufferPointer) -> (UnsafeRawBufferPointer, cut: Bool) {
        guard let segments, let start = segments.primaryStart, let index = segments.map.index(startingAt: start)
        else { return (bytes, false) }
        let room = segments.map.segments[index].remaining
        guard Int64(bytes.count) > room else { return (bytes, false) }
        return (UnsafeRawBufferPointer(rebasing: bytes[0..<Int(room)]), true)
    }

    /// The transfer's own request wrote `count` bytes of its segment.
    func primaryWrote(_ count: Int) {
        guard let segments, let start = segments.primaryStart, let index = segments.map.index(startingAt: start)
        else { return }
        segments.map.wrote(Int64(count), in: index)
    }

    // MARK: the other connections

    /// Opens one more connection for the next segment. Whether it did.
    func openConnection() -> Bool {
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
                    download.hub.publish(.progress(progress()))
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
    func fetchFinished(_ fetch: SegmentFetch, result: CURLcode) -> DownloadStateMachine.Action {
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
            let error = segmentFailure(result, refused: fetch.error, easy: easy)
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
        guard whole else { return endAttempt(.failed(segmentFailure(result, refused: request.bodyError, easy: easy))) }
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
    private func segmentFailure(_ result: CURLcode, refused: DownloadError?, easy: EasyHandle?) -> DownloadError {
        if let refused { return refused }
        guard result != CURLE_OK else {
            return DownloadError(
                code: .sizeMismatch,
                url: urlForErrors,
                detail: "the answer ended before the end of its segment"
            )
        }
        return DownloadError(
            code: result == CURLE_PARTIAL_FILE ? .sizeMismatch : .transport,
            url: urlForErrors,
            curlCode: Int(result.rawValue),
            detail: easy?.errorMessage ?? String(cString: curl_easy_strerror(result))
        )
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
        let advanced = (segmentedBytes ?? 0) > (lengthAtAttemptStart ?? 0)
        return perform(machine.transferEnded(result, progressed: advanced))
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
