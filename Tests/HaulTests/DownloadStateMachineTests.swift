import Testing

@testable import Haul

@Suite("DownloadStateMachine")
struct DownloadStateMachineTests {
    typealias Machine = DownloadStateMachine
    let url = "http://example.com/file"

    func machine(in state: String) -> Machine {
        var machine = Machine(url: url)
        switch state {
        case "idle": break
        case "connecting": _ = machine.admit()
        case "receiving":
            _ = machine.admit()
            _ = machine.responseReceived(.append(total: 10))
        case "paused": _ = machine.pause()
        case "completed":
            _ = machine.admit()
            _ = machine.responseReceived(.append(total: 10))
            _ = machine.transferEnded(.finished)
        case "failed":
            _ = machine.admit()
            _ = machine.transferEnded(.failed(DownloadError(code: .transport, url: url, curlCode: 7)))
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
        #expect(machine.responseReceived(.append(total: 42)) == .acceptBody(total: 42, truncatingPartial: false, restart: nil))
        #expect(machine.state == .receiving)
    }

    @Test func wholeBodyOnResumeTruncatesAndSaysWhy() {
        var machine = machine(in: "connecting")
        #expect(
            machine.responseReceived(.replace(total: 9, reason: .rangeIgnored))
                == .acceptBody(total: 9, truncatingPartial: true, restart: .rangeIgnored))
        #expect(machine.state == .receiving)
    }

    @Test func finishedTransferCompletes() {
        var machine = machine(in: "receiving")
        #expect(machine.transferEnded(.finished) == .complete)
        #expect(machine.state == .done(.completed))
    }

    @Test func failedTransferFailsFromConnectingAndReceiving() {
        let error = DownloadError(code: .transport, url: url, curlCode: 56)
        for start in ["connecting", "receiving"] {
            var machine = machine(in: start)
            #expect(machine.transferEnded(.failed(error)) == .fail(error))
            #expect(machine.state == .done(.failed(error)))
        }
    }

    @Test func alreadyCompleteClosesThenCompletes() {
        var machine = machine(in: "connecting")
        #expect(machine.responseReceived(.alreadyComplete(total: 10)) == .rejectBody)
        #expect(machine.state == .closing(.complete))
        // curl reports the refused body as a write error; the decision stands.
        let writeError = DownloadError(code: .transport, url: url, curlCode: 23)
        #expect(machine.transferEnded(.failed(writeError)) == .complete)
        #expect(machine.state == .done(.completed))
    }

    @Test func httpErrorFailsWithTheStatus() {
        var machine = machine(in: "connecting")
        #expect(machine.responseReceived(.fail(status: 404)) == .rejectBody)
        let action = machine.transferEnded(.failed(DownloadError(code: .transport, url: url, curlCode: 23)))
        guard case .fail(let error) = action else {
            Issue.record("expected fail, got \(action)")
            return
        }
        #expect(error.code == .httpStatus)
        #expect(error.httpStatus == 404)
        #expect(error.url == url)
    }

    @Test func unusableRangeRetriesFromZeroABoundedNumberOfTimes() {
        var machine = machine(in: "connecting")
        for _ in 0..<Machine.maximumRestarts {
            #expect(machine.responseReceived(.retryFromZero(reason: .rangeMismatch)) == .rejectBody)
            #expect(machine.state == .closing(.restartFromZero))
            #expect(machine.transferEnded(.finished) == .startRequest(truncatingPartial: true))
            #expect(machine.state == .connecting)
        }
        #expect(machine.responseReceived(.retryFromZero(reason: .rangeMismatch)) == .rejectBody)
        guard case .fail(let error) = machine.transferEnded(.finished) else {
            Issue.record("expected a failure after \(Machine.maximumRestarts) restarts")
            return
        }
        #expect(error.code == .rangeNotHonored)
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

    @Test func resumeReturnsToTheQueue() {
        var machine = machine(in: "paused")
        #expect(machine.resume() == .enqueue)
        #expect(machine.state == .idle)
        #expect(machine.admit() == .startRequest(truncatingPartial: false))
    }

    @Test func cancelFromEveryUnfinishedState() {
        for start in ["idle", "connecting", "receiving", "paused"] {
            var machine = machine(in: start)
            #expect(machine.cancel() == .cancel, "from \(start)")
            #expect(machine.state == .done(.cancelled))
        }
    }

    @Test func refusedCommandsChangeNothing() {
        for start in ["idle", "connecting", "receiving"] {
            var machine = machine(in: start)
            let before = machine.state
            #expect(machine.resume() == .none, "resume while \(start)")
            #expect(machine.state == before)
        }
        var paused = machine(in: "paused")
        #expect(paused.pause() == .none)
        #expect(paused.state == .paused)
        for start in ["completed", "failed", "cancelled"] {
            var machine = machine(in: start)
            let before = machine.state
            #expect(machine.pause() == .none, "pause after \(start)")
            #expect(machine.resume() == .none, "resume after \(start)")
            #expect(machine.cancel() == .none, "cancel after \(start)")
            #expect(machine.fail(DownloadError(code: .fileSystem, url: url)) == .none)
            #expect(machine.state == before)
            #expect(machine.isDone)
        }
    }

    @Test func localFailureBeforeAnyRequest() {
        var machine = Machine(url: url)
        let error = DownloadError(code: .fileSystem, url: url, errno: 13, path: "/x")
        #expect(machine.fail(error) == .fail(error))
        #expect(machine.state == .done(.failed(error)))
    }

    @Test func renameFailureTurnsCompletedIntoFailed() {
        var machine = machine(in: "completed")
        let error = DownloadError(code: .fileSystem, url: url, errno: 28, path: "/x")
        #expect(machine.completionFailed(error) == .fail(error))
        #expect(machine.state == .done(.failed(error)))
    }
}
