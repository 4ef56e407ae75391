/// Commands from any thread to the loop thread: a queue with no lock (``CommandQueue``) that wakes
/// the ``Reactor`` when it goes from empty to not empty (one eventfd write for a burst of
/// commands). The loop's owner drains it when woken. Generic, so the reactor knows nothing of what
/// the commands mean.
package final class CommandInbox<Command: Sendable>: Sendable {
    private let queue = CommandQueue<Command>()
    private let reactor: Reactor

    package init(reactor: Reactor) {
        self.reactor = reactor
    }

    /// Queues a command and wakes the loop.
    ///
    /// - Parameters:
    ///   - closing: the inbox accepts nothing more after this command (a shutdown).
    ///   - evenWhenClosed: accepted after the inbox closed (the loop's own reports, which a shutdown
    ///     waits for).
    /// - Returns: `false` when the inbox is closed and the command was dropped.
    @discardableResult
    package func submit(_ command: Command, closing: Bool = false, evenWhenClosed: Bool = false) -> Bool {
        switch queue.push(command, closing: closing, evenWhenClosed: evenWhenClosed) {
        case .refused: return false
        case .first: reactor.wake()
        case .behindOthers: break
        }
        return true
    }

    /// For a loop a test drives (``Reactor/adoptCallingThread()``): the calling thread becomes the
    /// loop's, so that what it asks is done at once, as on the loop's own thread. `false` (and
    /// nothing done) for a loop with a thread of its own.
    package func adoptCallingThreadIfEmbedded() -> Bool {
        reactor.adoptCallingThread()
    }

    /// Takes every queued command, in submission order. Loop thread, when woken.
    package func drain() -> [Command] {
        queue.takeAll()
    }
}
