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
        machine.moved(to: url.redactedString, from: download.url, after: cause, counted: counted)
        download.update(url: url)
        events.publish(.switchedURL(URL(string: url.redactedString) ?? url, after: cause))
        redirectsFollowed = 0
        return startRequest(truncating: false)
    }

    /// The decision on an answer of a URL the download moved to, before it is proven (the machine's,
    /// ``DownloadStateMachine/vet(_:partialHasBytes:partialIsThisURLs:)``): a URL it drops is not
    /// used again, and the download's URL is again the one whose answer wrote the partial.
    func vet(_ decision: ResponseDecision) -> ResponseDecision {
        let dropped = download.url
        let (vetted, drop) = machine.vet(
            decision,
            partialHasBytes: (sink?.receivedLength ?? 0) > 0,
            partialIsThisURLs: record.url == dropped.redactedString
        )
        guard let (reason, from) = drop else { return vetted }
        droppedURLs.insert(dropped)
        log(
            .debug,
            "a URL serves another file than the partial's: not used",
            metadata: ["haul.url": "\(dropped.redactedString)", "haul.reason": "\(reason)"]
        )
        events.publish(.warning(.urlDropped(URL(string: dropped.redactedString) ?? dropped, reason: reason)))
        download.update(url: from)
        return vetted
    }

    /// The URL moved to proved nothing (the attempt ends before its answer was accepted): the
    /// download's URL is again the one whose answer wrote the partial.
    func returnToProvenURL() {
        guard let from = machine.returnToProvenURL() else { return }
        download.update(url: from)
    }
}
