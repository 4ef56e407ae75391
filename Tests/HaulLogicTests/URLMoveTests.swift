import FoundationEssentials
import Testing

@testable import HaulTransfer
@testable import HaulValues

/// A move to another URL in the machine (``DownloadStateMachine/vet(_:partialHasBytes:partialIsThisURLs:)``):
/// a URL moved to proves the partial's file or is dropped, and the download goes back to the URL
/// whose answer wrote the partial; an answer that would replace the bytes is never taken from it.
@Suite("URL moves")
struct URLMoveTests {
    let first = URL(string: "http://user:secret@a.example/file")!
    let mirror = URL(string: "http://b.example/file")!
    let cause = HaulValues.DownloadError(code: .httpStatus, url: "http://a.example/file", httpStatus: 503)

    /// A machine receiving from `first`, with `alternatives` mirrors, moved to `mirror` after `cause`.
    private func moved(counted: Bool = true, alternatives: Int = 2) -> DownloadStateMachine {
        var machine = DownloadStateMachine(url: first.redactedString, alternatives: alternatives)
        _ = machine.admit()
        machine.moved(to: mirror.redactedString, from: first, after: cause, counted: counted)
        return machine
    }

    @Test("errors name the URL moved to; the one to return to keeps its credentials")
    func movedNamesTheNewURL() {
        var machine = moved()
        #expect(machine.url == "http://b.example/file")
        #expect(machine.move?.from == first)
        // Moving again before a proof still returns to the first URL, the partial's.
        machine.moved(to: "http://c.example/file", from: mirror, after: cause, counted: true)
        #expect(machine.move?.from == first)
    }

    /// Every decision a moved URL's answer can have, with the partial's bytes from another URL: the
    /// ones that would replace the bytes drop the URL (as the failure that made it move), the rest
    /// go through.
    @Test(
        "an answer that would replace the partial's bytes drops the URL moved to",
        arguments: [
            (
                ResponseDecision.replace(total: 10, reason: .remoteChanged),
                HaulValues.RestartReason?.some(.remoteChanged)
            ),
            (.replace(total: nil, reason: .rangeIgnored), .rangeIgnored),
            (.retryFromZero(reason: .overlapMismatch), .overlapMismatch),
            (.retryFromZero(reason: .rangeMismatch), .rangeMismatch),
            (.append(total: 10), nil),
            (.fail(status: 404), nil),
            (.notModified(total: 10), nil),
            (.alreadyComplete(total: 10), nil),
        ]
    )
    func vetted(decision: ResponseDecision, dropsFor reason: HaulValues.RestartReason?) {
        var machine = moved()
        let (vetted, dropped) = machine.vet(decision, partialHasBytes: true, partialIsThisURLs: false)
        if let reason {
            #expect(vetted == .rejectURL(cause))
            #expect(dropped?.reason == reason && dropped?.returnTo == first)
            #expect(machine.move == nil && machine.url == first.redactedString)
            #expect(machine.alternatives == 1)  // the dropped mirror is not one left to try
        } else {
            #expect(vetted == decision && dropped == nil)
            #expect(machine.move != nil && machine.url == mirror.redactedString)
        }
    }

    @Test("not judged: an empty partial, bytes from this very URL, or a download that did not move")
    func notJudged() {
        let restart = ResponseDecision.retryFromZero(reason: .remoteChanged)
        var empty = moved()
        #expect(empty.vet(restart, partialHasBytes: false, partialIsThisURLs: false).dropped == nil)
        var own = moved()
        #expect(own.vet(restart, partialHasBytes: true, partialIsThisURLs: true).decision == restart)
        var still = DownloadStateMachine(url: first.redactedString)
        #expect(still.vet(restart, partialHasBytes: true, partialIsThisURLs: false).decision == restart)
        #expect(still.returnToProvenURL() == nil)
    }

    @Test("a fresh URL (not one of the alternatives) is dropped without counting one")
    func freshURLNotCounted() {
        var machine = moved(counted: false, alternatives: 2)
        _ = machine.vet(.retryFromZero(reason: .remoteChanged), partialHasBytes: true, partialIsThisURLs: false)
        #expect(machine.alternatives == 2)
    }

    @Test("a proof keeps the URL; an attempt that ends unproven goes back to the partial's")
    func provenOrReturned() {
        var proven = moved()
        proven.moveProven()
        #expect(proven.move == nil && proven.returnToProvenURL() == nil)
        #expect(proven.url == mirror.redactedString)
        var unproven = moved()
        #expect(unproven.returnToProvenURL() == first)
        #expect(unproven.url == first.redactedString && unproven.move == nil)
    }
}
