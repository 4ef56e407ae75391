import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulTransfer
@testable import HaulValues

@Suite("DownloadStateMachine")
struct DownloadStateMachineTests {
    typealias Machine = DownloadStateMachine
    let url = "http://example.com/file"

    /// Whether `machine` reached its final state.
    static func isDone(_ machine: Machine) -> Bool {
        if case .done = machine.state { return true }
        return false
    }

    func machine(in state: String) -> Machine {
        var machine = Machine(url: url)
        switch state {
        case "idle": break
        case "connecting": _ = machine.admit()
        case "receiving":
            _ = machine.admit()
            _ = machine.responseReceived(.append(total: 10))
        case "paused": _ = machine.pause()
        case "finishing":
            _ = machine.admit()
            _ = machine.responseReceived(.append(total: 10))
            _ = machine.transferEnded(.received)
        case "completed":
            _ = machine.admit()
            _ = machine.responseReceived(.append(total: 10))
            _ = machine.transferEnded(.received)
            machine.placed()
        case "failed":
            _ = machine.admit()
            _ = machine.transferEnded(.failed(HaulValues.DownloadError(code: .transport, url: url, curlCode: 7)))
        case "cancelled": _ = machine.cancel()
        default: Issue.record("unknown state \(state)")
        }
        return machine
    }

    @Test func admitStartsARequest() {
        var machine = Machine(url: url)
        #expect(machine.admit() == .startRequest(truncatingPartial: false))
        #expect(machine.state == .connecting)
    }

    @Test func acceptedHeadStartsReceiving() {
        var machine = machine(in: "connecting")
        #expect(
            machine.responseReceived(.append(total: 42))
                == .accept(total: 42, truncatingPartial: false, restart: nil)
        )
        #expect(machine.state == .receiving)
    }

    @Test func wholeBodyOnResumeTruncatesAndSaysWhy() {
        var machine = machine(in: "connecting")
        #expect(
            machine.responseReceived(.replace(total: 9, reason: .rangeIgnored))
                == .accept(total: 9, truncatingPartial: true, restart: .rangeIgnored)
        )
        #expect(machine.state == .receiving)
    }

    @Test func anotherConnectionSeeingAnotherVersionRestartsThenFails() {
        var machine = machine(in: "receiving")
        for _ in 0..<Machine.maximumRestarts {
            #expect(machine.fileChanged(.remoteChanged) == .startRequest(truncatingPartial: true))
            #expect(machine.state == .connecting)
            _ = machine.responseReceived(.append(total: 10))
        }
        // Changed again and again without progress: not restarted forever.
        let error = HaulValues.DownloadError(
            code: .rangeNotHonored,
            url: url,
            detail: RestartReason.remoteChanged.description
        )
        #expect(machine.fileChanged(.remoteChanged) == .fail(error))
        #expect(machine.state == .done(.failed(error)))
        // Only a receiving download has other connections.
        var idle = Machine(url: url)
        #expect(idle.fileChanged(.remoteChanged) == .none)
        #expect(idle.state == .idle)
    }

    @Test("a range answered with the whole file, or versions that differ twice: one connection from then on")
    func overOneConnection() {
        // Another version on one connection restarts on several; the whole file to a range does not.
        var changed = machine(in: "receiving")
        _ = changed.fileChanged(.remoteChanged)
        #expect(!changed.overOneConnection)
        var ignored = machine(in: "receiving")
        _ = ignored.fileChanged(.rangeIgnored)
        #expect(ignored.overOneConnection)
        var refused = machine(in: "receiving")
        refused.rangeRefused()
        #expect(refused.overOneConnection)
        // Versions that differ: said once, at the second time, and not after a refused range.
        var versions = machine(in: "receiving")
        #expect(versions.versionsDiffered() == false)
        #expect(!versions.overOneConnection)
        #expect(versions.versionsDiffered() == true)
        #expect(versions.overOneConnection)
        #expect(versions.versionsDiffered() == false)
        #expect(versions.versionConflicts == 3)
        #expect(refused.versionsDiffered() == false && refused.versionsDiffered() == false)
    }

    @Test(
        "an accepted answer's validators reach the row before its first byte reaches the partial",
        arguments: [
            // (row in memory, segmented, bytes on disk) → when
            (true, false, Int64(0), RowTiming.whenSetAside),
            (true, true, 100, .whenSetAside),
            (false, true, 0, .now),  // other connections write from this turn's end
            (false, false, 100, .now),  // bytes the old validators vouched for
            (false, false, 0, .beforeFirstWrite),
        ]
    )
    func rowTiming(inMemory: Bool, segmented: Bool, onDisk: Int64, timing: RowTiming) {
        var machine = machine(in: "receiving")
        #expect(machine.answerAccepted(rowInMemory: inMemory, segmented: segmented, bytesOnDisk: onDisk) == timing)
        // Behind until written, unless nothing on disk trusts it.
        #expect(machine.rowBehind == !inMemory)
        #expect(machine.rowWritten() == !inMemory)
        #expect(!machine.rowBehind && !machine.rowWritten())
    }

    @Test func finishedTransferCompletes() {
        var machine = machine(in: "receiving")
        #expect(machine.transferEnded(.received) == .received)
        #expect(machine.state == .finishing)
        machine.placed()
        #expect(machine.state == .done(.completed))
    }

    @Test func failedTransferFailsFromConnectingAndReceiving() {
        let error = HaulValues.DownloadError(code: .transport, url: url, curlCode: 56)
        for start in ["connecting", "receiving"] {
            var machine = machine(in: start)
            #expect(machine.transferEnded(.failed(error)) == .fail(error))
            #expect(machine.state == .done(.failed(error)))
        }
    }

    @Test func aFileFoundWholeBeforeAnyRequestCompletes() {
        // Placed by a process killed before its row said so, or every segment written: no request.
        var machine = machine(in: "connecting")
        #expect(machine.foundComplete() == .received)
        #expect(machine.state == .finishing)
        machine.placed()
        #expect(machine.state == .done(.completed))
    }

    @Test func alreadyCompleteClosesThenCompletes() {
        var machine = machine(in: "connecting")
        #expect(machine.responseReceived(.alreadyComplete(total: 10)) == .reject)
        #expect(machine.state == .closing(.received))
        // curl reports the refused body as a write error; the decision stands.
        let writeError = HaulValues.DownloadError(code: .transport, url: url, curlCode: 23)
        #expect(machine.transferEnded(.failed(writeError)) == .received)
        #expect(machine.state == .finishing)
    }

    @Test func httpErrorFailsWithTheStatus() {
        var machine = machine(in: "connecting")
        #expect(machine.responseReceived(.fail(status: 404)) == .reject)
        let action = machine.transferEnded(.failed(HaulValues.DownloadError(code: .transport, url: url, curlCode: 23)))
        guard case .fail(let error) = action else {
            Issue.record("expected fail, got \(action)")
            return
        }
        #expect(error.code == .httpStatus)
        #expect(error.httpStatus == 404)
        #expect(error.url == url)
    }

    @Test func aRangeThatEndedAsksForTheNextAtOnce() {
        var machine = DownloadStateMachine(url: url, failures: 2, retryLimit: 5)
        _ = machine.admit()
        #expect(
            machine.responseReceived(.append(total: 100))
                == .accept(total: 100, truncatingPartial: false, restart: nil)
        )
        #expect(machine.transferEnded(.rangeEnded, progressed: true) == .startRequest(truncatingPartial: false))
        #expect(machine.state == .connecting)
        #expect(machine.failures == 0)  // the range was progress
        #expect(
            machine.responseReceived(.append(total: 100))
                == .accept(total: 100, truncatingPartial: false, restart: nil)
        )
        #expect(machine.transferEnded(.received, progressed: true) == .received)
    }

    @Test("a failure another URL may not have moves to the next mirror, each once until progress, then the policy")
    func mirrors() {
        var machine = DownloadStateMachine(url: url, failures: 0, retryLimit: 1, alternatives: 2)
        _ = machine.admit()
        let refused = HaulValues.DownloadError(code: .transport, url: url, curlCode: 7)
        #expect(machine.transferEnded(.failed(refused)) == .tryNextURL(refused))
        #expect(machine.state == .connecting)
        let missing = HaulValues.DownloadError(code: .httpStatus, url: url, httpStatus: 404)
        _ = machine.responseReceived(.fail(status: 404))
        #expect(machine.transferEnded(.received) == .tryNextURL(missing))
        // Both tried: a transient failure is retried, a permanent one fails.
        #expect(machine.transferEnded(.failed(refused)) == .retry(refused))
        // Bytes arrived on the next attempt: every mirror may be tried again.
        var progressed = DownloadStateMachine(url: url, failures: 0, retryLimit: 0, alternatives: 1)
        _ = progressed.admit()
        #expect(progressed.transferEnded(.failed(refused)) == .tryNextURL(refused))
        _ = progressed.responseReceived(.append(total: 10))
        #expect(progressed.transferEnded(.failed(refused), progressed: true) == .tryNextURL(refused))
        #expect(progressed.alternativesTried == 1)
        // A dropped mirror is not one tried, and not one left.
        progressed.alternativeDropped()
        #expect(progressed.alternatives == 0 && progressed.alternativesTried == 0)
        #expect(progressed.urlRefused(refused) == .fail(refused))
        // Local failures never move: the disk would fail anywhere.
        var local = DownloadStateMachine(url: url, alternatives: 3)
        _ = local.admit()
        _ = local.responseReceived(.append(total: 10))
        let full = HaulValues.DownloadError(code: .fileSystem, url: url, errno: ENOSPC)
        local.bodyFailed(full)
        #expect(local.transferEnded(.received) == .fail(full))
    }

    @Test("401, 403 and 410 ask for a fresh URL once per streak when a hook exists; a mirror next")
    func refresh() {
        var machine = DownloadStateMachine(url: url, alternatives: 1, refreshesURLs: true)
        _ = machine.admit()
        _ = machine.responseReceived(.fail(status: 403))
        let forbidden = HaulValues.DownloadError(code: .httpStatus, url: url, httpStatus: 403)
        #expect(machine.transferEnded(.received) == .refreshURL(forbidden))
        // It waits for the hook in a state of its own, then sends the next request to the fresh URL.
        #expect(machine.state == .awaitingFreshURL(forbidden))
        let arrived = machine.freshURLArrived()
        #expect(arrived && machine.state == .connecting)
        let again = machine.freshURLArrived()
        #expect(!again)
        // The fresh URL is refused too: not refreshed again; the mirror.
        _ = machine.responseReceived(.fail(status: 403))
        #expect(machine.transferEnded(.received) == .tryNextURL(forbidden))
        #expect(machine.urlRefused(forbidden) == .fail(forbidden))
        // A rejected URL (another file) ends the request as the failure that made it move.
        var other = DownloadStateMachine(url: url, alternatives: 1)
        _ = other.admit()
        #expect(other.responseReceived(.rejectURL(forbidden)) == .reject)
        #expect(other.transferEnded(.received) == .tryNextURL(forbidden))
        // Without a hook a 403 is what it was.
        var plain = DownloadStateMachine(url: url)
        _ = plain.admit()
        _ = plain.responseReceived(.fail(status: 410))
        #expect(
            plain.transferEnded(.received)
                == .fail(HaulValues.DownloadError(code: .httpStatus, url: url, httpStatus: 410))
        )
    }

    @Test("waiting for header values and for a fresh URL are states: paused, cancelled, answered or refused")
    func waitingStates() {
        var headers = DownloadStateMachine(url: url)
        #expect(headers.admit(needsHeaders: true) == .askForHeaders)
        #expect(headers.state == .awaitingHeaders)
        #expect(headers.headersArrived() == .startRequest(truncatingPartial: false))
        #expect(headers.state == .connecting)
        #expect(headers.headersArrived() == .none)  // a late answer changes nothing
        var none = DownloadStateMachine(url: url)
        _ = none.admit(needsHeaders: true)
        let unavailable = HaulValues.DownloadError(code: .headersUnavailable, url: url)
        let failed = none.fail(unavailable)
        #expect(failed == .fail(unavailable) && none.state == .done(.failed(unavailable)))
        let forbidden = HaulValues.DownloadError(code: .httpStatus, url: url, httpStatus: 403)
        func waitingForURL() -> DownloadStateMachine {
            var machine = DownloadStateMachine(url: url, retryLimit: 1, refreshesURLs: true)
            _ = machine.admit()
            _ = machine.responseReceived(.fail(status: 403))
            _ = machine.transferEnded(.received)
            return machine
        }
        var refused = waitingForURL()
        #expect(refused.urlRefused(forbidden) == .fail(forbidden))  // a 403 is not transient
        for var waiting in [headersWaiting(), waitingForURL()] {
            let action = waiting.pause()
            #expect(action == .pause && waiting.state == .paused)
        }
        for var waiting in [headersWaiting(), waitingForURL()] {
            let action = waiting.cancel()
            #expect(action == .cancel && waiting.state == .done(.cancelled))
        }
        var idle = DownloadStateMachine(url: url)
        let late = idle.headersArrived()
        let fresh = idle.freshURLArrived()
        #expect(late == .none && !fresh && idle.state == .idle)
    }

    func headersWaiting() -> DownloadStateMachine {
        var machine = DownloadStateMachine(url: url)
        _ = machine.admit(needsHeaders: true)
        return machine
    }

    @Test func invalidResponseFailsWithoutRetry() {
        var machine = DownloadStateMachine(url: url, failures: 0, retryLimit: 5)
        _ = machine.admit()
        #expect(machine.responseReceived(.invalid("two lengths")) == .reject)
        guard case .fail(let error) = machine.transferEnded(.received) else {
            Issue.record("an invalid response must fail, not retry")
            return
        }
        #expect(error.code == .transport && error.curlCode == 8 && error.detail == "two lengths" && !error.isTransient)
        #expect(error.description.contains("not valid HTTP"))
    }

    @Test func unusableRangeRetriesFromZeroABoundedNumberOfTimes() {
        var machine = machine(in: "connecting")
        for _ in 0..<Machine.maximumRestarts {
            #expect(machine.responseReceived(.retryFromZero(reason: .rangeMismatch)) == .reject)
            #expect(machine.state == .closing(.restartFromZero))
            #expect(machine.transferEnded(.received) == .startRequest(truncatingPartial: true))
            #expect(machine.state == .connecting)
        }
        #expect(machine.responseReceived(.retryFromZero(reason: .rangeMismatch)) == .reject)
        guard case .fail(let error) = machine.transferEnded(.received) else {
            Issue.record("expected a failure after \(Machine.maximumRestarts) restarts")
            return
        }
        #expect(error.code == .rangeNotHonored)
    }

    @Test func restartsCountAcrossRetriesUntilProgress() {
        let error = HaulValues.DownloadError(code: .transport, url: url, curlCode: 18)
        // Restarts carried in from earlier attempts of the same download.
        var machine = Machine(url: url, failures: 1, restarts: Machine.maximumRestarts - 1, retryLimit: 5)
        #expect(machine.admit() == .startRequest(truncatingPartial: false))
        #expect(machine.responseReceived(.retryFromZero(reason: .rangeMismatch)) == .reject)
        #expect(machine.transferEnded(.received) == .startRequest(truncatingPartial: true))
        #expect(machine.restarts == Machine.maximumRestarts)
        // The restarted request got no further than before: the count stays.
        #expect(
            machine.responseReceived(.append(total: 10))
                == .accept(total: 10, truncatingPartial: false, restart: nil)
        )
        #expect(machine.transferEnded(.failed(error), progressed: false) == .retry(error))
        #expect(machine.restarts == Machine.maximumRestarts)
        #expect(machine.failures == 2)

        // An attempt that gets further than ever before clears both counts.
        var next = Machine(url: url, failures: 2, restarts: Machine.maximumRestarts, retryLimit: 5)
        _ = next.admit()
        _ = next.responseReceived(.append(total: 10))
        #expect(next.transferEnded(.failed(error), progressed: true) == .retry(error))
        #expect(next.restarts == 0)
        #expect(next.failures == 1)

        // With no restart left, the next wrong range fails the download.
        var last = Machine(url: url, restarts: Machine.maximumRestarts, retryLimit: 5)
        _ = last.admit()
        #expect(last.responseReceived(.retryFromZero(reason: .rangeMismatch)) == .reject)
        guard case .fail(let failure) = last.transferEnded(.received) else {
            Issue.record("expected a failure with no restart left")
            return
        }
        #expect(failure.code == .rangeNotHonored)
    }

    @Test func pauseFromEveryActiveState() {
        for start in ["idle", "connecting", "receiving"] {
            var machine = machine(in: start)
            #expect(machine.pause() == .pause, "from \(start)")
            #expect(machine.state == .paused)
        }
        var closing = machine(in: "connecting")
        _ = closing.responseReceived(.alreadyComplete(total: 1))
        #expect(closing.pause() == .pause)
    }

    @Test func bodyThatCannotBeWrittenEndsTheRequestWithItsError() {
        // A local write failure while receiving: curl is refused the body, and when it lets go of the
        // transfer the error is the attempt's (retried when transient, failed when not).
        let disk = HaulValues.DownloadError(code: .fileSystem, url: url, errno: ENOSPC, detail: "write failed")
        var machine = machine(in: "receiving")
        machine.bodyFailed(disk)
        #expect(machine.state == .closing(.fail(disk)))
        // A second error of the same write changes nothing; the first is reported.
        machine.bodyFailed(HaulValues.DownloadError(code: .fileTooLarge, url: url))
        #expect(machine.state == .closing(.fail(disk)))
        let curlSaw = HaulValues.DownloadError(code: .transport, url: url, curlCode: 23)
        #expect(machine.transferEnded(.failed(curlSaw)) == .fail(disk))
        #expect(machine.state == .done(.failed(disk)))
        // Outside receiving there is no body to fail.
        for start in ["idle", "connecting", "paused", "completed"] {
            var other = self.machine(in: start)
            let before = other.state
            other.bodyFailed(disk)
            #expect(other.state == before, "from \(start)")
        }
    }

    @Test func unchangedFileKeepsTheDestination() {
        var machine = machine(in: "connecting")
        #expect(machine.responseReceived(.notModified(total: 10)) == .reject)
        #expect(machine.state == .closing(.unchanged))
        #expect(
            machine.transferEnded(.failed(HaulValues.DownloadError(code: .transport, url: url, curlCode: 23)))
                == .keepDestination
        )
        #expect(machine.state == .finishing)
    }

    @Test func cancelFromEveryUnfinishedState() {
        for start in ["idle", "connecting", "receiving", "paused"] {
            var machine = machine(in: start)
            #expect(machine.cancel() == .cancel, "from \(start)")
            #expect(machine.state == .done(.cancelled))
        }
    }

    @Test(
        "a body received whole but not all handed on (a stream's reader left) is cancelled; a failed or cancelled one is not"
    )
    func cancelWhileHandingOver() {
        var handing = machine(in: "finishing")
        #expect(handing.cancelHandOver() == .cancel)
        #expect(handing.state == .done(.cancelled))
        for start in ["completed", "failed", "cancelled"] {
            var machine = machine(in: start)
            let before = machine.state
            #expect(machine.cancelHandOver() == .none, "after \(start)")
            #expect(machine.state == before)
        }
        // Before its end, it is cancel().
        var receiving = machine(in: "receiving")
        #expect(receiving.cancelHandOver() == .cancel && receiving.state == .done(.cancelled))
    }

    @Test func refusedCommandsChangeNothing() {
        var paused = machine(in: "paused")
        #expect(paused.pause() == .none)
        #expect(paused.state == .paused)
        for start in ["completed", "failed", "cancelled"] {
            var machine = machine(in: start)
            let before = machine.state
            #expect(machine.pause() == .none, "pause after \(start)")
            #expect(machine.cancel() == .none, "cancel after \(start)")
            #expect(machine.fail(HaulValues.DownloadError(code: .fileSystem, url: url)) == .none)
            #expect(machine.state == before)
            #expect(Self.isDone(machine))
        }
    }

    @Test func localFailureBeforeAnyRequest() {
        var machine = Machine(url: url)
        let error = HaulValues.DownloadError(code: .fileSystem, url: url, errno: 13, path: "/x")
        #expect(machine.fail(error) == .fail(error))
        #expect(machine.state == .done(.failed(error)))
    }

    @Test("finishing (every byte received, the file being placed) is neither paused nor cancelled, and done is final")
    func finishingEndsOnlyByItsPlacing() {
        var machine = machine(in: "finishing")
        #expect(machine.pause() == .none)
        #expect(machine.cancel() == .none)
        #expect(machine.fail(HaulValues.DownloadError(code: .fileSystem, url: url)) == .none)
        #expect(machine.state == .finishing)
        #expect(machine.hasEnded && !Self.isDone(machine))
        machine.placed()
        #expect(machine.state == .done(.completed))
        #expect(machine.hasEnded && Self.isDone(machine))
    }

    @Test func renameFailureFailsAFinishingDownload() {
        var machine = machine(in: "finishing")
        let error = HaulValues.DownloadError(code: .fileSystem, url: url, errno: EACCES, path: "/x")
        #expect(machine.completionFailed(error) == .fail(error))
        #expect(machine.state == .done(.failed(error)))
    }

    @Test("a finishing download the full disk stopped (its bytes all in the partial) is retried while its budget lasts")
    func fullDiskRetriesAFinishingDownload() {
        let error = HaulValues.DownloadError(code: .fileSystem, url: url, errno: ENOSPC, path: "/x/journal.sqlite")
        var machine = Machine(url: url, failures: 0, retryLimit: 1)
        _ = machine.admit()
        _ = machine.responseReceived(.append(total: 10))
        _ = machine.transferEnded(.received)
        #expect(machine.completionFailed(error) == .retry(error))
        #expect(machine.state == .waitingToRetry)
        _ = machine.admit()
        _ = machine.responseReceived(.append(total: 10))
        _ = machine.transferEnded(.received)
        #expect(machine.completionFailed(error) == .fail(error))  // the budget is spent
        #expect(machine.state == .done(.failed(error)))
        #expect(HaulValues.DownloadError(code: .fileSystem, url: url, errno: EDQUOT).isOutOfSpace)  // a full quota too
    }
}

@Suite("Retries")
struct RetryTests {
    let url = "http://example.com/file"
    let transient = HaulValues.DownloadError(code: .transport, url: "http://example.com/file", curlCode: 7)

    @Test("transient failures are retried until the budget is spent; progress refills it")
    func budget() {
        var machine = DownloadStateMachine(url: url, failures: 0, retryLimit: 2)
        for expected in 1...2 {
            #expect(machine.admit() == .startRequest(truncatingPartial: false))
            #expect(machine.transferEnded(.failed(transient)) == .retry(transient))
            #expect(machine.failures == expected)
            #expect(machine.state == .waitingToRetry)
        }
        // An attempt that wrote bytes resets the count: the third failure in a row is retried too.
        #expect(machine.admit() == .startRequest(truncatingPartial: false))
        #expect(
            machine.responseReceived(.append(total: 100))
                == .accept(total: 100, truncatingPartial: false, restart: nil)
        )
        #expect(machine.transferEnded(.failed(transient), progressed: true) == .retry(transient))
        #expect(machine.failures == 1)
        #expect(machine.admit() == .startRequest(truncatingPartial: false))
        #expect(machine.transferEnded(.failed(transient)) == .retry(transient))
        #expect(machine.admit() == .startRequest(truncatingPartial: false))
        #expect(machine.transferEnded(.failed(transient)) == .fail(transient))
        #expect(machine.state == .done(.failed(transient)))
    }

    @Test("permanent failures and refused statuses fail at once; retryable statuses are retried")
    func permanentAndTransient() {
        for status in [400, 401, 403, 404, 410, 416, 501, 505] {
            var machine = DownloadStateMachine(url: url, failures: 0, retryLimit: 5)
            _ = machine.admit()
            #expect(machine.responseReceived(.fail(status: status)) == .reject)
            guard case .fail(let error) = machine.transferEnded(.received) else {
                Issue.record("\(status) must fail")
                continue
            }
            #expect(error.httpStatus == status && !error.isTransient)
        }
        for status in [408, 425, 429, 500, 502, 503, 504] {
            var machine = DownloadStateMachine(url: url, failures: 0, retryLimit: 5)
            _ = machine.admit()
            _ = machine.responseReceived(.fail(status: status))
            guard case .retry(let error) = machine.transferEnded(.received) else {
                Issue.record("\(status) must be retried")
                continue
            }
            #expect(error.httpStatus == status)
        }
        for (code, transient) in [
            (6, false), (7, true), (18, true), (28, true), (47, false), (52, true), (56, true), (60, false),
        ] {
            let error = HaulValues.DownloadError(code: .transport, url: url, curlCode: code)
            #expect(error.isTransient == transient, "curl \(code)")
        }
        // A disk that cannot be written (EIO, EACCES) fails; a full one (ENOSPC) is retried, issue 74.
        #expect(!HaulValues.DownloadError(code: .fileSystem, url: url, errno: EIO, path: "/x").isTransient)
        #expect(!HaulValues.DownloadError(code: .fileSystem, url: url, errno: EACCES, path: "/x").isTransient)
        #expect(HaulValues.DownloadError(code: .fileSystem, url: url, errno: ENOSPC, path: "/x").isTransient)
        // Out of descriptors: other transfers free theirs, so it is retried, and the advice says what to raise.
        for code in [EMFILE, ENFILE] {
            let error = HaulValues.DownloadError(
                code: .fileSystem,
                url: url,
                errno: code,
                path: "/x.part",
                detail: "open failed"
            )
            #expect(error.isTransient)
            #expect(error.description.contains("ulimit -n"))
        }
        #expect(
            !HaulValues.DownloadError(code: .fileSystem, url: url, errno: EACCES, path: "/x").description.contains(
                "ulimit"
            )
        )
        // "Kept" only where there is a partial file to keep.
        #expect(
            HaulValues.DownloadError(code: .fileSystem, url: url, errno: ENOSPC, path: "/s/a.part").description
                .hasSuffix(
                    "the partial file is kept."
                )
        )
        #expect(
            !HaulValues.DownloadError(code: .fileSystem, url: nil, errno: EACCES, path: "/s/.haul").description
                .contains("kept")
        )
        #expect(HaulValues.DownloadError(code: .sizeMismatch, url: url).isTransient)
        #expect(!HaulValues.DownloadError(code: .checksumMismatch, url: url).isTransient)
    }

    @Test("backoff doubles with jitter between half and all, is capped, and yields to Retry-After")
    func backoff() {
        let policy = RetryPolicy(baseDelay: .seconds(1), maximumDelay: .seconds(10))
        for failures in 1...8 {
            let full = min(Duration.seconds(10), .seconds(1) * (1 << (failures - 1)))
            #expect(policy.delay(afterFailures: failures, retryAfter: nil, random: 0) == full / 2)
            #expect(policy.delay(afterFailures: failures, retryAfter: nil, random: 0.999_999_999) <= full)
            #expect(policy.delay(afterFailures: failures, retryAfter: nil, random: 0.999_999_999) > full * 0.99)
        }
        #expect(policy.delay(afterFailures: 1000, retryAfter: nil, random: 1) == .seconds(10))
        #expect(policy.delay(afterFailures: 3, retryAfter: .seconds(120), random: 0.3) == .seconds(120))
        #expect(policy.delay(afterFailures: 3, retryAfter: .seconds(86_400), random: 0.3) == .seconds(3600))
    }

    @Test(
        "after an attempt that was served (a connection cut mid-body): within a tenth of the base delay, not a backoff"
    )
    func retryAfterServedAttempt() {
        let policy = RetryPolicy(baseDelay: .seconds(1), maximumDelay: .seconds(10))
        #expect(policy.delay(afterFailures: 1, retryAfter: nil, random: 0, served: true) == .zero)
        #expect(policy.delay(afterFailures: 1, retryAfter: nil, random: 0.5, served: true) == .milliseconds(50))
        #expect(
            policy.delay(afterFailures: 1, retryAfter: nil, random: 0.999_999_999, served: true) < .milliseconds(100)
        )
        // Not served: the backoff, at least half the base delay.
        #expect(policy.delay(afterFailures: 1, retryAfter: nil, random: 0, served: false) == .milliseconds(500))
        // A server that asked for a pause is given it, served or not.
        #expect(policy.delay(afterFailures: 1, retryAfter: .seconds(7), random: 0.5, served: true) == .seconds(7))
    }

    @Test("Retry-After: seconds, an HTTP date, or nothing usable")
    func retryAfterParsing() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)  // Tue, 14 Nov 2023 22:13:20 GMT
        #expect(RetryPolicy.parseRetryAfter("120", now: now) == .seconds(120))
        #expect(RetryPolicy.parseRetryAfter(" 0 ", now: now) == .seconds(0))
        #expect(RetryPolicy.parseRetryAfter("Tue, 14 Nov 2023 22:14:20 GMT", now: now) == .seconds(60))
        #expect(RetryPolicy.parseRetryAfter("Tue, 14 Nov 2023 22:00:00 GMT", now: now) == .zero)
        #expect(RetryPolicy.parseRetryAfter("99999999999999999999", now: now) == RetryPolicy.longestRetryAfter)
        for garbage in [nil, "", "soon", "-5", "1.5", "Tue, 99 Nov 2023 22:14:20 GMT"] {
            #expect(RetryPolicy.parseRetryAfter(garbage, now: now) == nil, "\(garbage ?? "nil")")
        }
    }

    @Test("HTTP dates, read as curl reads them: RFC 9110's three forms name one instant, zones count, no date is nil")
    func httpDates() {
        let instant = Date(timeIntervalSince1970: 784_111_777)  // RFC 9110's example: Sun, 06 Nov 1994 08:49:37 GMT
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == instant)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == instant)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == instant)
        #expect(HTTPDate.parse(" Sun, 06 Nov 1994 08:49:37 GMT\r\n") == instant)
        #expect(HTTPDate.parse("Thu, 01 Jan 1970 00:00:00 GMT") == Date(timeIntervalSince1970: 0))
        #expect(HTTPDate.parse("Wednesday, 01-Mar-23 00:00:00 GMT") == Date(timeIntervalSince1970: 1_677_628_800))
        #expect(HTTPDate.parse("Thu, 29 Feb 2024 12:00:00 GMT") == Date(timeIntervalSince1970: 1_709_208_000))
        // What servers send beside the standard: a zone (honoured), or none (GMT).
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 +0100") == instant.addingTimeInterval(-3600))
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 00:49:37 PST") == instant)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37") == instant)
        for garbage in [
            "", "not a date", "120", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:61:37 GMT", "Tue, 99 Nov 2023 22:14:20 GMT", "1994-11-06T08:49:37Z",
        ] {
            #expect(HTTPDate.parse(garbage) == nil, "\(garbage)")
        }
    }

    @Test("path pieces and creating folders")
    func filePaths() throws {
        #expect(FilePath.directory(of: "/a/b/c.bin") == "/a/b")
        #expect(FilePath.directory(of: "c.bin") == "")
        #expect(FilePath.directory(of: "/c.bin") == "/")
        #expect(FilePath.directory(of: "/a/b/") == "/a")
        #expect(FilePath.lastComponent(of: "/a/b/c.bin") == "c.bin")
        #expect(FilePath.lastComponent(of: "c.bin") == "c.bin")
        #expect(FilePath.lastComponent(of: "/a/b/") == "b")
        // The root stays itself; names that are one character of several bytes are names.
        #expect(FilePath.directory(of: "/") == "/")
        #expect(FilePath.lastComponent(of: "/") == "")
        #expect(FilePath.directory(of: "/données/é/") == "/données")
        #expect(FilePath.lastComponent(of: "/données/é/") == "é")
        #expect(FilePath.lastComponent(of: "é") == "é")
        // A name that starts with a combining mark makes one Character with the `/` before it: paths
        // are cut at the byte.
        #expect(FilePath.directory(of: "/a/\u{301}x") == "/a")
        #expect(FilePath.lastComponent(of: "/a/\u{301}x") == "\u{301}x")
        #expect("  a b \t\r\n".trimmingWhitespace == "a b")
        #expect(" \n ".trimmingWhitespace == "")

        let root = FileManager.default.temporaryDirectory.appendingPathComponent("haul-paths-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(FilePath.makeDirectories("\(root)/x/y/z") == nil)
        #expect(FilePath.makeDirectories("\(root)/x/y/z") == nil)  // already there
        var status = stat()
        #expect(stat("\(root)/x/y/z", &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR)
        #expect(FileManager.default.createFile(atPath: "\(root)/file", contents: Data("x".utf8)))
        #expect(FilePath.makeDirectories("\(root)/file") == ENOTDIR)
        #expect(FilePath.makeDirectories("\(root)/file/below") == ENOTDIR)
    }
}
