import CHaul
import Foundation
import Glibc
import Logging
import Synchronization
import Testing

@testable import Haul
@testable import HaulIO

/// Loop-only code knows whether it runs on the loop (issue 59, item 4: as NIO's
/// `preconditionInEventLoop`); debug builds stop when it does not (`Reactor.assertOnLoop`).
@Suite("The loop thread")
struct LoopThreadTests {
    /// Records, when woken, whether the reactor said it was on its loop and on which thread it ran,
    /// then stops the loop (loop-only itself).
    final class Witness: ReactorDelegate, @unchecked Sendable {
        let seen = Mutex<(onLoop: Bool, thread: pthread_t)?>(nil)
        func reactorWasWoken(_ reactor: Reactor) {
            seen.withLock { $0 = (reactor.isOnLoop, pthread_self()) }
            reactor.stop()
        }
        func reactor(_ reactor: Reactor, requestDidEnd easy: UnsafeMutableRawPointer, result: CURLcode) {}
        func reactorWillRun(_ reactor: Reactor) {}
        func reactorTurnDidEnd(_ reactor: Reactor) {}
    }

    @Test("a reactor says its loop thread is the one its callbacks run on, and no other")
    func loopThreadIsKnown() async throws {
        let reactor = try Reactor(logger: Logger(label: "test"), idleConnections: 1)
        let witness = Witness()
        reactor.delegate = witness
        #expect(!reactor.isOnLoop, "not started: no thread is its loop")
        try reactor.start()
        #expect(!reactor.isOnLoop, "the test's thread is not the loop")
        reactor.wake()
        await reactor.waitUntilStopped()
        reactor.join()
        let (onLoop, thread) = try #require(witness.seen.withLock { $0 })
        #expect(onLoop)
        #expect(pthread_equal(thread, pthread_self()) == 0)
    }
}
