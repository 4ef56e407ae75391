import Foundation
import Glibc
import Synchronization
import Testing

@testable import Haul

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

    @Test("callers that come while a sync runs wait for the next one, and share it")
    func callersShareTheNextSync() {
        let fake = FakeSync(holdsFirst: true)
        let shared = SharedSync(sync: { fake.sync($0) })
        let results = Mutex<[Bool]>([])
        let group = DispatchGroup()
        // The first caller starts a sync, which holds.
        spawn(in: group) {
            let result = shared.sync(device: 7, descriptor: 1)
            results.withLock { $0.append(result) }
        }
        #expect(fake.started.wait(timeout: .now() + 10) == .success)
        // Three more come while it runs: it may have started before their writes, so none starts
        // its own and none returns when it ends; they wait for one started after.
        for descriptor in 2...4 {
            spawn(in: group) {
                let result = shared.sync(device: 7, descriptor: Int32(descriptor))
                results.withLock { $0.append(result) }
            }
        }
        #expect(waitForWaiters(3, on: shared))
        #expect(fake.calls.load(ordering: .sequentiallyConsistent) == 1)
        fake.release.signal()
        #expect(group.wait(timeout: .now() + 10) == .success)
        // The first sync, and one more for the three.
        #expect(fake.calls.load(ordering: .sequentiallyConsistent) == 2)
        #expect(results.withLock { $0 } == [true, true, true, true])
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
        let results = Mutex<[Bool]>([])
        let group = DispatchGroup()
        spawn(in: group) {
            let result = shared.sync(device: 9, descriptor: 1)
            results.withLock { $0.append(result) }
        }
        #expect(fake.started.wait(timeout: .now() + 10) == .success)
        for _ in 0..<2 {
            spawn(in: group) {
                let result = shared.sync(device: 9, descriptor: 2)
                results.withLock { $0.append(result) }
            }
        }
        #expect(waitForWaiters(2, on: shared))
        fake.release.signal()
        #expect(group.wait(timeout: .now() + 10) == .success)
        // The first sync succeeded for its caller; the second, shared by the two, failed for both
        // (each then syncs its files one by one).
        #expect(results.withLock { $0.sorted { !$0 && $1 } } == [false, false, true])
        #expect(fake.calls.load(ordering: .sequentiallyConsistent) == 2)
        #expect(shared.sync(device: 9, descriptor: 2))
        #expect(fake.calls.load(ordering: .sequentiallyConsistent) == 3)
    }
}
