import CHaul
import Foundation
import Synchronization
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport

/// The stream readers' waits on their pipes (``PipeReadiness``): woken by bytes and by the writers'
/// going, several readers of one pipe at once, cancelled before or while waiting, and thousands of
/// waits from many tasks at once (what crashed libdispatch's read sources).
@Suite("Waiting for a stream's pipe", .timeLimit(.minutes(1)))
struct PipeReadinessTests {
    func pipeEnds() throws -> (read: Int32, write: Int32) {
        // Close-on-exec (as the library's): a child another test spawns meanwhile must not keep the
        // write end open, or closing it would never wake a reader. (A first version used pipe(): the
        // suite hung, nginx and haul children holding this test's write ends.)
        var ends: [Int32] = [-1, -1]
        try #require(CHaul_pipe(&ends) == 0)
        return (ends[0], ends[1])
    }

    /// Starts a task that waits on `fd`, and returns it once its wait is registered.
    func registeredWait(on fd: Int32, ended: (@Sendable () -> Void)? = nil) async -> Task<Void, Never> {
        let (registered, registration) = AsyncStream<Void>.makeStream()
        let task = Task {
            await PipeReadiness.shared.waitUntilReadable(fd, registered: { registration.finish() })
            ended?()
        }
        for await _ in registered {}
        return task
    }

    @Test("a wait ends when a byte arrives, and when the last writer goes, for every reader of the pipe")
    func bytesAndTheWritersGoing() async throws {
        let (readEnd, writeEnd) = try pipeEnds()
        defer { close(readEnd) }
        var byte: UInt8 = 7
        let ended = Atomic<Bool>(false)
        let waiter = await registeredWait(on: readEnd) { ended.store(true, ordering: .sequentiallyConsistent) }
        // Registered, and nothing to read: it waits (a wait that returned at once would fail here).
        for _ in 0..<100 { await Task.yield() }
        let endedAlready = ended.load(ordering: .sequentiallyConsistent)
        #expect(!endedAlready)
        #expect(write(writeEnd, &byte, 1) == 1)
        await waiter.value
        #expect(read(readEnd, &byte, 1) == 1 && byte == 7)
        // Empty again: two readers wait; the writer's end closed wakes both (a read then finds EOF).
        let readers = (0..<2).map { _ in Task { await PipeReadiness.shared.waitUntilReadable(readEnd) } }
        close(writeEnd)
        for reader in readers { await reader.value }
        #expect(read(readEnd, &byte, 1) == 0)
    }

    @Test("a cancelled wait ends at once, before or after it was registered, and the pipe can be waited on again")
    func cancelled() async throws {
        let (readEnd, writeEnd) = try pipeEnds()
        defer { close(readEnd) }
        // Nobody writes: only the cancellation can end these.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await PipeReadiness.shared.waitUntilReadable(readEnd)
        }
        await early.value
        let waiting = await registeredWait(on: readEnd)
        waiting.cancel()
        await waiting.value
        var byte: UInt8 = 1
        let again = Task { await PipeReadiness.shared.waitUntilReadable(readEnd) }
        #expect(write(writeEnd, &byte, 1) == 1)
        await again.value
        close(writeEnd)
    }

    @Test("300 pipes from many tasks at once, waits ended by bytes, by closing and by cancellation, numbers reused")
    func manyAtOnce() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<300 {
                group.addTask {
                    let (readEnd, writeEnd) = try pipeEnds()
                    let waiter = Task { await PipeReadiness.shared.waitUntilReadable(readEnd) }
                    switch index % 3 {
                    case 0:
                        var byte = UInt8(truncatingIfNeeded: index)
                        #expect(write(writeEnd, &byte, 1) == 1)
                        await waiter.value
                        #expect(read(readEnd, &byte, 1) == 1 && byte == UInt8(truncatingIfNeeded: index))
                        close(writeEnd)
                    case 1:
                        close(writeEnd)
                        await waiter.value
                    default:
                        waiter.cancel()
                        await waiter.value
                        close(writeEnd)
                    }
                    // Closed as soon as the wait ended: the number goes to the next pipe.
                    close(readEnd)
                }
            }
            try await group.waitForAll()
        }
    }
}
