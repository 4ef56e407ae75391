import FoundationEssentials
import HaulValues

/// A move to another URL after a failure (the next mirror, or the fresh URL a refresh hook gave):
/// the failure that made it move, whether it used one of the machine's alternatives, and the URL
/// whose answer wrote the partial, which the download returns to when the new one proves nothing.
struct URLMove: Sendable {
    let cause: DownloadError
    let counted: Bool
    let from: URL
}

/// Moving to another URL: a URL moved to must prove it serves the partial's file before its bytes
/// are appended; an answer that would not continue the partial drops it, never splices.
extension DownloadStateMachine {
    /// Requests go to `url` (credentials removed) after `cause`; `current`, the URL in use, is the
    /// one to return to, unless the download already moved from another since its last proof.
    mutating func moved(to url: String, from current: URL, after cause: DownloadError, counted: Bool) {
        move = URLMove(cause: cause, counted: counted, from: move?.from ?? current)
        requestsGo(to: url)
    }

    /// The answer of the URL moved to was accepted: it continues the partial, and is the download's.
    mutating func moveProven() {
        move = nil
    }

    /// The decision on an answer of a URL the download moved to, before it is proven: one that would
    /// not continue the partial (another file, an overlap that differs, a wrong range, or the whole
    /// file from byte 0, which proves nothing of the bytes on disk) drops that URL, and the download
    /// goes on as the failure that made it move says (``ResponseDecision/rejectURL(_:)``). Not when
    /// the partial holds no bytes, nor when its bytes came from this URL (its file changed, and
    /// starts over as always). `dropped`: why it was dropped, and the URL requests go back to.
    mutating func vet(
        _ decision: ResponseDecision,
        partialHasBytes: Bool,
        partialIsThisURLs: Bool
    ) -> (decision: ResponseDecision, dropped: (reason: RestartReason, returnTo: URL)?) {
        guard let move, partialHasBytes, !partialIsThisURLs else { return (decision, nil) }
        let reason: RestartReason
        switch decision {
        case .replace(_, let why), .retryFromZero(let why): reason = why
        default: return (decision, nil)
        }
        if move.counted { alternativeDropped() }
        _ = returnToProvenURL()
        return (.rejectURL(move.cause), (reason, move.from))
    }

    /// The URL moved to proved nothing (dropped, or the attempt ends before its answer was accepted):
    /// requests go back to the one whose answer wrote the partial, which is returned (`nil` when the
    /// download did not move), so that a later attempt does not take an unproven URL for one the
    /// caller chose (which may start over).
    mutating func returnToProvenURL() -> URL? {
        guard let from = move?.from else { return nil }
        move = nil
        requestsGo(to: from.redactedString)
        return from
    }
}
