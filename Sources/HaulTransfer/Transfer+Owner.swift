import CHaul
import FoundationEssentials
import Glibc
import HaulIO
import HaulValues

/// What its owner, the ``Scheduler``, sees of a transfer: ten members. It tells the transfer what
/// happened (``apply(_:)``, one entry for every input but curl's write callback), asks after its
/// connections and its checkpoint, sweeps it for stalls, and takes its first answer. Everything
/// else of a transfer is its own: internal to the `HaulTransfer` target, which the compiler refuses
/// to the scheduler.
extension Transfer {
    /// The handle callers hold (its id, URL, destination, state directory, counts).
    package var handle: LiveDownload { download }

    /// The transfer whose request handle `raw` carries (its own request's, or one of its other
    /// connections'), found from the handle's context; `nil` for a handle of none. The owner asks
    /// it, and routes nothing by handle itself.
    package static func owning(_ raw: UnsafeMutableRawPointer) -> Transfer? { Connection.of(raw)?.transfer }

    /// Tells it `input`; returns what reaches beyond it (``SlotAction``), or `nil` when the input is
    /// not for it now (see ``TransferInput``).
    package func apply(_ input: TransferInput) -> SlotAction? {
        switch input {
        case .admit(let needsHeaders, let reportsAnswer):
            self.reportsAnswer = reportsAnswer
            return admit(needsHeaders: needsHeaders)
        case .headers(let result):
            guard case .awaitingHeaders = machine.state else { return nil }
            switch result {
            case .success(let headers):
                send(headers: headers)
                return slotAction(for: perform(machine.headersArrived()))
            case .failure(let error):
                return slotAction(for: perform(machine.fail(error)))
            }
        case .pause:
            return slotAction(for: perform(machine.pause()))
        case .shutdown:
            guard !machine.hasEnded else { return SlotAction.none }
            return slotAction(for: perform(machine.pause()), interruptedByShutdown: true)
        case .cancel:
            return cancel()
        case .fail(let error):
            return slotAction(for: perform(machine.fail(error)))
        case .urlRefused(let error):
            guard case .awaitingFreshURL(let cause) = machine.state else { return nil }
            if let error { log(.debug, "the URL refresher failed", metadata: ["haul.error": "\(error)"]) }
            return slotAction(for: perform(machine.urlRefused(cause)))
        case .freshURL(let url, let headers):
            guard case .awaitingFreshURL(let cause) = machine.state else { return nil }
            return freshURLArrived(url, headers: headers, after: cause)
        case .freshURLRejected(let error):
            guard case .awaitingFreshURL = machine.state else { return nil }
            return slotAction(for: perform(machine.fail(error)))
        case .requestEnded(let raw, let result):
            return ended(request: raw, result: result)
        case .stalled(let raw, let seconds):
            connection(of: raw)?.stalledFor = seconds
            return ended(request: raw, result: CURLE_OPERATION_TIMEDOUT)
        case .placed(let outcome):
            return placed(outcome)
        case .finishStream(let done):
            finishStream(done)
            return SlotAction.none
        case .limitRate(let rate):
            environment.rateLimiter.setLimit(rate, for: self)
            record.maxBytesPerSecond = rate
            return SlotAction.none
        case .asked(let row):
            adoptAsked(row)
            return SlotAction.none
        case .synced(let bytes):
            record.bytesSynced = max(record.bytesSynced, bytes)
            return SlotAction.none
        case .syncedSegments(let snapshot):
            guard let segments else { return nil }
            segments.markSynced(snapshot)
            record.bytesSynced = segments.map.bytesSynced
            segmentBytesWritten()
            return SlotAction.none
        }
    }

    /// Its connections in curl now, and whether another one would have work (the owner grants it,
    /// ``Admission``).
    package var connections: (live: Int, wantsMore: Bool) { (liveConnections, wantsConnection) }

    /// Opens connections for its next segments while it wants them and `mayOpen` allows one more
    /// beside the `live` ones it has.
    package func openConnections(while mayOpen: (_ live: Int) -> Bool) {
        while wantsConnection, mayOpen(liveConnections) {
            guard openConnection() else { return }
        }
    }

    /// Every checkpoint interval: hands buffered bytes to the kernel and records them. Returns the
    /// job that syncs them, or `nil` when it is not receiving, its write failed (the write callback
    /// meets the same error and fails the download), or they are durable already.
    package func checkpointReceiving() -> DiskJob? {
        receivedBytesToSync().flatMap(checkpoint(bytes:))
    }

    /// The owner's sweep (every 250 ms): a slow download gives its buffer back (see ``FileSink``),
    /// and the requests that received nothing for `stallTimeout` nanoseconds are returned, to be
    /// ended (``TransferInput/stalled(_:seconds:)``).
    package func sweep(now: UInt64, stallTimeout: UInt64) -> [UnsafeMutableRawPointer] {
        releaseIdleBuffer(now: now)
        return stalledRequests(now: now, after: stallTimeout)
    }

    // MARK: the inputs' work

    /// Its connection whose request handle is `raw` now, if any.
    private func connection(of raw: UnsafeMutableRawPointer) -> Connection? {
        guard let connection = Connection.of(raw), connection.transfer === self, connection.easy?.raw == raw else {
            return nil
        }
        return connection
    }

    /// The request of handle `raw` ended with `result`: curl reported it done, the owner's stall
    /// sweep ended it, or it refused a chunk while the rate limiter let it go. `nil` when `raw` is
    /// no request of this transfer now (its owner removes the handle).
    func ended(request raw: UnsafeMutableRawPointer, result: CURLcode) -> SlotAction? {
        guard let connection = connection(of: raw) else { return nil }
        let result = connection.easy?.vetted(result) ?? result
        if connection === own { return slotAction(for: requestEnded(result)) }
        return slotAction(for: fetchEnded(connection, result: result))
    }

    /// The refresher gave `url` (and `headers`, if any, which its requests send from now on and its
    /// row names) for `cause`: it moves there.
    private func freshURLArrived(_ url: URL, headers: [DownloadHeader]?, after cause: DownloadError) -> SlotAction {
        if let headers {
            send(headers: headers)
            record.headerNames = headers.map(\.name)
        }
        guard machine.freshURLArrived() else { return SlotAction.none }
        return slotAction(for: move(to: url, after: cause, counted: false))
    }

    /// The job that syncs its partial file's first `bytes` (and, over several connections, records
    /// what each segment holds), or nil when they are durable already.
    func checkpoint(bytes: Int64) -> DiskJob? {
        guard bytes > record.bytesSynced, let partialPath else { return nil }
        return .checkpoint(
            id,
            directory: store.directory,
            path: partialPath,
            bytes: bytes,
            segments: committedMap?.encoded
        )
    }
}
