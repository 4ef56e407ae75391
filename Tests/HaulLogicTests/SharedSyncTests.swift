import Foundation
import Glibc
import Synchronization
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport

/// One sync at a time per file system, shared by the lanes that wait for it. The sync itself is a
/// closure here that counts its calls and, where a test says so, waits to be let go: no disk, no
/// sleeps (a waiting thread is seen through ``SharedSync/waitingThreads``).
@Suite("SharedSync")
struct SharedSyncTests {
    /// A sync that counts its calls, answers from `results` in turn (then `true`), and holds its
    /// first call until `release` is signalled when `holdsFirst`.
    final class FakeSync: Sendable {
        let calls = Atomic<Int>(0)
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holdsFirst: Bool
        let results: [Bool]

        init(holdsFirst: Bool = false, results: [Bool] = []) {
            self.holdsFirst = holdsFirst
            self.results = results
        }

        func sync(_ descriptor: Int32) -> Bool {
            let call = calls.add(1, ordering: .sequentiallyConsistent).newValue
            started.signal()
            if call == 1, holdsFirst { release.wait() }
            return call <= results.count ? results[call - 1] : true
        }
    }

    /// Runs `body` on a thread of its own (the dispatch pool may have no thread to spare while
    /// others wait) and enters `group` until it returns.
    private func spawn(in group: DispatchGroup, _ body: @escaping @Sendable () -> Void) {
        group.enter()
        Thread {
            body()
            group.leave()
        }.start()
    }

    /// Waits (bounded) until `count` threads wait on `shared`.
    private func waitForWaiters(_ count: Int, on shared: SharedSync) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while shared.waitingThreads < count && Date() < deadline { sched_yield() }
        return shared.waitingThreads == count
    }

    /// One caller starts a sync, which `fake` holds; `others` more come while it runs (seen waiting
    /// on `shared`), then it is let go. Every caller's result, once all returned.
    private func callersDuringAHeldSync(_ fake: FakeSync, _ shared: SharedSync, device: UInt64, others: Int) -> [Bool] {
        let results = Mutex<[Bool]>([])
        let group = DispatchGroup()
        spawn(in: group) {
            let result = shared.sync(device: device, descriptor: 1)
            results.withLock { $0.append(result) }
        }
        #expect(fake.started.wait(timeout: .now() + 10) == .success)
        for descriptor in 0..<others {
            spawn(in: group) {
                let result = shared.sync(device: device, descriptor: Int32(2 + descriptor))
                results.withLock { $0.append(result) }
            }
        }
        #expect(waitForWaiters(others, on: shared))
        // While the first runs, nobody started another.
        #expect(fake.calls.load(ordering: .sequentiallyConsistent) == 1)
        fake.release.signal()
        #expect(group.wait(timeout: .now() + 10) == .success)
        return results.withLock { $0 }
    }

    @Test("callers that come while a sync runs wait for the next one, and share it")
    func callersShareTheNextSync() {
        let fake = FakeSync(holdsFirst: true)
        let shared = SharedSync(sync: { fake.sync($0) })
        // The first sync may have started before the three callers' writes: none returns when it
        // ends, and none starts its own; they wait for one started after, and share it.
        let results = callersDuringAHeldSync(fake, shared, device: 7, others: 3)
        #expect(fake.calls.load(ordering: .sequentiallyConsistent) == 2)
        #expect(results == [true, true, true, true])
        #expect(shared.waitingThreads == 0)
    }

    @Test("a caller after a finished sync starts its own; file systems do not share")
    func laterCallersAndOtherDevicesSyncAgain() {
        let fake = FakeSync()
        let shared = SharedSync(sync: { fake.sync($0) })
        #expect(shared.sync(device: 1, descriptor: 3))
        #expect(shared.sync(device: 1, descriptor: 3))
        #expect(shared.sync(device: 2, descriptor: 4))
        #expect(fake.calls.load(ordering: .sequentiallyConsistent) == 3)
    }

    @Test("a failed sync is a failure for every caller it was to cover; the next one starts afresh")
    func failureReachesItsCallers() {
        let fake = FakeSync(holdsFirst: true, results: [true, false])
        let shared = SharedSync(sync: { fake.sync($0) })
        let results = callersDuringAHeldSync(fake, shared, device: 9, others: 2)
        // The first sync succeeded for its caller; the second, shared by the two, failed for both
        // (each then syncs its files one by one).
        #expect(results.sorted { !$0 && $1 } == [false, false, true])
        #expect(fake.calls.load(ordering: .sequentiallyConsistent) == 2)
        #expect(shared.sync(device: 9, descriptor: 2))
        #expect(fake.calls.load(ordering: .sequentiallyConsistent) == 3)
    }
}
