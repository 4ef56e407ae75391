import FoundationEssentials
import Testing

@testable import HaulIO
@testable import HaulScheduler
@testable import HaulValues

/// When an awaited control is answered (``DownloadControl/holds(in:runsHere:syncPending:)``): the
/// whole table of controls, states and where the download stands here.
@Suite("Awaited controls")
struct ControlsTests {
    typealias State = HaulIO.DownloadState

    static let failure = HaulValues.DownloadError(code: .httpStatus, url: "http://a.example/f", httpStatus: 404)
    static let states: [State] = [
        .queued, .connecting, .receiving, .paused, .completed(URL(fileURLWithPath: "/tmp/f")),
        .failed(failure), .waitingToRetry(failure, after: .seconds(1)), .cancelled,
    ]

    @Test("a pause holds once the download runs no more and its sync reported: paused, or ended meanwhile")
    func pause() {
        for state in Self.states {
            let stopped: Bool
            switch state {
            case .paused, .completed, .failed, .cancelled: stopped = true
            default: stopped = false
            }
            #expect(DownloadControl.pause.holds(in: state, runsHere: false, syncPending: false) == stopped, "\(state)")
            #expect(!DownloadControl.pause.holds(in: state, runsHere: true, syncPending: false), "running: \(state)")
            #expect(!DownloadControl.pause.holds(in: state, runsHere: false, syncPending: true), "syncing: \(state)")
        }
    }

    @Test("a cancel holds once the download ended, wherever it stands here")
    func cancel() {
        for state in Self.states {
            for (runsHere, syncPending) in [(false, false), (true, false), (false, true), (true, true)] {
                #expect(
                    DownloadControl.cancel.holds(in: state, runsHere: runsHere, syncPending: syncPending)
                        == state.isFinal,
                    "\(state) running \(runsHere) syncing \(syncPending)"
                )
            }
        }
    }

    @Test("a resume, a rate limit and a hand-over hold at once")
    func others() {
        for control in [DownloadControl.resume, .limitRate(1000), .limitRate(nil), .handedOver] {
            for state in Self.states {
                #expect(control.holds(in: state, runsHere: true, syncPending: true), "\(control) \(state)")
            }
        }
    }
}
