import FoundationEssentials
import HaulValues

/// Moving a download to another of its URLs: the next mirror after a failure another URL may not
/// have, or the fresh URL a refresh hook gave for an expired one. The bytes on disk continue only
/// if the new URL's answer proves the same file (the overlap before them, the length, and the
/// validator on record); an answer that is another file drops that URL, never splices.
extension Transfer {
    /// The machine moves to the next URL after `cause`: the next of ``urls`` after the one in use
    /// (round and round) that was not dropped.
    func moveToNextURL(after cause: DownloadError) -> DownloadStateMachine.Action {
        let current = urls.firstIndex(of: download.url) ?? 0
        let next = (0..<urls.count).lazy.map { self.urls[(current + 1 + $0) % self.urls.count] }
            .first { !self.droppedURLs.contains($0) && $0 != self.download.url }
        guard let next else { return perform(machine.urlRefused(cause)) }
        return move(to: next, after: cause, counted: true)
    }

    /// Sends the next request to `url`, which must prove it serves the partial's file.
    func move(to url: URL, after cause: DownloadError, counted: Bool) -> DownloadStateMachine.Action {
        log(
            .debug,
            "moving to another URL",
            metadata: [
                "haul.url.next": "\(url.redactedString)", "haul.after": "\(cause.cause)",
            ]
        )
        let from = moved?.from ?? download.url
        download.update(url: url)
        machine.requestsGo(to: url.redactedString)
        events.publish(.switchedURL(URL(string: url.redactedString) ?? url, after: cause))
        moved = (cause, counted, from)
        redirectsFollowed = 0
        return startRequest(truncating: false)
    }

    /// The decision on an answer of a URL the download moved to, before it is proven: any answer
    /// that would not continue the partial (another file, an overlap that differs, a wrong range, or
    /// the whole file from byte 0, which proves nothing of the bytes on disk) drops that URL, and
    /// the download goes on as the failure that made it move says. A URL whose answer wrote the
    /// partial (the row's) is not judged so: its file changed, and starts over as always.
    func vet(_ decision: ResponseDecision) -> ResponseDecision {
        guard let (cause, counted, _) = moved, (sink?.receivedLength ?? 0) > 0,
            record.url != download.url.redactedString
        else { return decision }
        let reason: RestartReason
        switch decision {
        case .replace(_, let why), .retryFromZero(let why): reason = why
        default: return decision
        }
        let dropped = download.url
        droppedURLs.insert(dropped)
        if counted { machine.alternativeDropped() }
        log(
            .debug,
            "a URL serves another file than the partial's: not used",
            metadata: ["haul.url": "\(dropped.redactedString)", "haul.reason": "\(reason)"]
        )
        events.publish(.warning(.urlDropped(URL(string: dropped.redactedString) ?? dropped, reason: reason)))
        returnToProvenURL()
        return .rejectURL(cause)
    }

    /// The URL moved to proved nothing (dropped, or the attempt ends before its answer was
    /// accepted): the download's URL is again the one whose answer wrote the partial, so that a
    /// later attempt does not take an unproven URL for one the caller chose (which may start over).
    func returnToProvenURL() {
        guard let (_, _, from) = moved else { return }
        moved = nil
        download.update(url: from)
        machine.requestsGo(to: from.redactedString)
    }
}
