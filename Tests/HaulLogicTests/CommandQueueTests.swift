import Foundation
import Synchronization
import Testing

@testable import HaulIO

/// The loop's inbox with no lock (``CommandQueue``): every command pushed is taken once, each
/// sender's in its order; one push in a burst asks for the wake; nothing a closed queue refuses
/// is taken, and nothing but what is sent `evenWhenClosed` comes after the command that closed it.
@Suite("Commands to the loop, with no lock")
struct CommandQueueTests {
    struct Sent: Sendable, Equatable {
        var sender: Int
        var number: Int
        var evenWhenClosed = false
        var closes = false
    }

    @Test("one sender: pushed in order, taken in order; the first push of each burst asks for the wake")
    func oneSender() {
        let queue = CommandQueue<Int>()
        #expect(queue.takeAll().isEmpty)
        #expect(queue.push(1) == .first && queue.push(2) == .behindOthers && queue.push(3) == .behindOthers)
        #expect(queue.takeAll() == [1, 2, 3] && queue.takeAll().isEmpty)
        #expect(queue.push(4) == .first)
        #expect(queue.takeAll() == [4])
    }

    @Test("closed by a command: what follows is refused, but for what comes even when closed; it stays closed")
    func closing() {
        let queue = CommandQueue<String>()
        #expect(queue.push("a") == .first)
        #expect(queue.push("shutdown", closing: true) == .behindOthers && queue.isClosed)
        #expect(queue.push("late") == .refused)
        #expect(queue.push("report", evenWhenClosed: true) == .behindOthers)
        #expect(queue.takeAll() == ["a", "shutdown", "report"])
        #expect(queue.isClosed && queue.push("later") == .refused)
        #expect(queue.push("last report", evenWhenClosed: true) == .first)
        #expect(queue.takeAll() == ["last report"])
    }

    @Test("commands left untaken are released with the queue")
    func releasedWithTheQueue() {
        let counter = Counter()
        do {
            let queue = CommandQueue<Token>()
            for _ in 0..<10 { _ = queue.push(Token(counter)) }
            _ = queue.push(Token(counter), closing: true)
            #expect(queue.push(Token(counter)) == .refused)
            #expect(counter.alive.load(ordering: .relaxed) == 11)
        }
        #expect(counter.alive.load(ordering: .relaxed) == 0)
    }

    final class Counter: Sendable {
        let alive = Atomic<Int>(0)
    }

    final class Token: Sendable {
        let counter: Counter
        init(_ counter: Counter) {
            self.counter = counter
            counter.alive.add(1, ordering: .relaxed)
        }
        deinit { counter.alive.subtract(1, ordering: .relaxed) }
    }

    @Test("8 senders at once, 20,000 commands each, one taker: each taken once and in its sender's order")
    func manySenders() async throws {
        let queue = CommandQueue<Sent>()
        let senders = 8
        let each = 20_000
        let firsts = Atomic<Int>(0)
        let threads = SenderThreads(senders) { sender in
            for number in 0..<each where queue.push(Sent(sender: sender, number: number)) == .first {
                firsts.add(1, ordering: .relaxed)
            }
        }
        var next = Array(repeating: 0, count: senders)
        var nonEmptyTakes = 0
        var taken = 0
        while taken < senders * each {
            let batch = queue.takeAll()
            if !batch.isEmpty { nonEmptyTakes += 1 }
            for sent in batch {
                guard sent.number == next[sent.sender] else {
                    Issue.record("sender \(sent.sender): \(sent.number) taken where \(next[sent.sender]) was due")
                    return
                }
                next[sent.sender] += 1
            }
            taken += batch.count
            if batch.isEmpty { await Task.yield() }
        }
        await threads.finished()
        #expect(queue.takeAll().isEmpty)
        #expect(next == Array(repeating: each, count: senders))
        // Each burst's first push asked for the one wake that the take emptying it answered.
        #expect(firsts.load(ordering: .relaxed) == nonEmptyTakes)
    }

    @Test("senders racing the command that closes: nothing of theirs is taken after it, nothing refused is taken")
    func closingWhileSending() async throws {
        for round in 0..<20 {
            let queue = CommandQueue<Sent>()
            let refused = Mutex<Set<Int>>([])
            let threads = SenderThreads(4) { sender in
                for number in 0..<2_000 {
                    let evenWhenClosed = number % 10 == 0
                    let sent = Sent(sender: sender, number: number, evenWhenClosed: evenWhenClosed)
                    if queue.push(sent, evenWhenClosed: evenWhenClosed) == .refused {
                        refused.withLock { _ = $0.insert(sender * 10_000 + number) }
                    }
                    if sender == 0, number == 500 {
                        _ = queue.push(Sent(sender: 9, number: 0, closes: true), closing: true)
                    }
                }
            }
            await threads.finished()
            let taken = queue.takeAll()
            let closedAt = try #require(taken.firstIndex { $0.closes }, "round \(round)")
            let afterClosing = taken[(closedAt + 1)...].filter { !$0.evenWhenClosed }
            #expect(afterClosing.isEmpty, "round \(round)")
            let keys = Set(taken.map { $0.sender * 10_000 + $0.number })
            #expect(keys.isDisjoint(with: refused.withLock { $0 }), "round \(round)")
            #expect(taken.count - 1 + refused.withLock { $0.count } == 4 * 2_000, "round \(round)")
        }
    }

    /// Senders on threads of their own, started together; ``finished()`` waits for them without
    /// holding a thread of the test's (the cooperative pool's).
    final class SenderThreads: Sendable {
        private let state: Mutex<(left: Int, waiter: CheckedContinuation<Void, Never>?)>

        init(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
            state = Mutex((count, nil))
            let start = DispatchSemaphore(value: 0)
            for index in 0..<count {
                Thread { [self] in
                    start.wait()
                    body(index)
                    let waiter = state.withLock { state in
                        state.left -= 1
                        return state.left == 0 ? state.waiter.take() : nil
                    }
                    waiter?.resume()
                }.start()
            }
            for _ in 0..<count { start.signal() }
        }

        func finished() async {
            await withCheckedContinuation { continuation in
                let done = state.withLock { state in
                    if state.left == 0 { return true }
                    state.waiter = continuation
                    return false
                }
                if done { continuation.resume() }
            }
        }
    }
}
