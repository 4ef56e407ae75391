import Dispatch
import Synchronization
import Testing

@testable import HaulIO
@testable import HaulValues

/// The disk lanes' hand-off (``DiskLanes``): every job sent is reported once, a download's in the
/// order sent, and what is sent while a lane runs a batch waits and goes in its next batch, whole.
/// The jobs are syncs of files that do not exist: each reports at once (`bytes` -1), no sync is
/// timed, so one lane runs them all.
@Suite("Disk lanes' hand-off", .timeLimit(.minutes(1)))
struct DiskLanesTests {
    /// What the lanes reported, batch by batch; resumes a waiter once `expected` results came.
    final class Reports: Sendable {
        private let state = Mutex<(batches: [[String]], expected: Int, done: CheckedContinuation<Void, Never>?)>(
            ([], 0, nil)
        )

        func add(_ results: [DiskResult]) {
            let ids = results.map { result -> String in
                switch result {
                case .synced(let id, _, _, _), .placed(let id, _): id.rawValue
                }
            }
            let done = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.batches.append(ids)
                guard state.batches.joined().count >= state.expected else { return nil }
                defer { state.done = nil }
                return state.done
            }
            done?.resume()
        }

        /// Returns once `count` results came back.
        func wait(for count: Int) async {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    state.expected = count
                    if state.batches.joined().count >= count { return true }
                    state.done = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        }

        var batches: [[String]] { state.withLock { $0.batches } }
    }

    static func job(_ name: String) -> DiskJob {
        .checkpoint(
            HaulValues.DownloadID(rawValue: name),
            directory: "/nonexistent",
            path: "/nonexistent/haul-\(name)",
            bytes: 1
        )
    }

    @Test("many turns sent: each job reported once, in the order sent")
    func everyJobOnceInOrder() async {
        let reports = Reports()
        let lanes = DiskLanes(report: { reports.add($0) })
        var sent: [String] = []
        for turn in 0..<300 {
            for job in 0..<(1 + turn % 4) {
                let name = "t\(turn)j\(job)"
                lanes.add(Self.job(name))
                sent.append(name)
            }
            lanes.send()
        }
        #expect(lanes.pending == sent.count)
        await reports.wait(for: sent.count)
        #expect(Array(reports.batches.joined()) == sent)
        #expect(reports.batches.allSatisfy { !$0.isEmpty })
    }

    @Test("turns sent while the lane runs a batch wait, and go together in its next batch")
    func sentMeanwhileGoTogether() async {
        let reports = Reports()
        let entered = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let release = DispatchSemaphore(value: 0)
        let first = Atomic<Bool>(true)
        let lanes = DiskLanes(report: { results in
            // The first batch holds its lane (a lane's own thread, not the test's) until released.
            if first.exchange(false, ordering: .acquiringAndReleasing) {
                entered.withLock { $0.take() }?.resume()
                release.wait()
            }
            reports.add(results)
        })
        await withCheckedContinuation { continuation in
            entered.withLock { $0 = continuation }
            lanes.add(Self.job("first"))
            lanes.send()
        }
        var meanwhile: [String] = []
        for turn in 0..<5 {
            for job in 0..<3 {
                lanes.add(Self.job("m\(turn).\(job)"))
                meanwhile.append("m\(turn).\(job)")
            }
            lanes.send()
        }
        release.signal()
        await reports.wait(for: 1 + meanwhile.count)
        #expect(reports.batches == [["first"], meanwhile])
    }
}
