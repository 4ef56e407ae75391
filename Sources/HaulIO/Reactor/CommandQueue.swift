import Synchronization

/// Many threads' commands to one taker, with no lock (a Treiber stack the taker empties whole, as
/// an MPSC queue in an event loop's inbox commonly is): a sender pushes its command with one
/// compare-and-swap and learns whether the queue was empty (so that one wake serves a burst); the
/// taker swaps the whole stack out and reverses it into the order sent. A closed queue refuses
/// what is sent after the command that closed it, but for what is sent `evenWhenClosed`.
///
/// The top is one word: the top node's address, with its lowest bit (addresses are aligned) saying
/// whether the queue is closed; the taker's swap keeps that bit. Nodes are retained from the push to
/// the take. No ABA: nodes are only ever pushed one at a time and taken all together, never popped
/// one by one.
package final class CommandQueue<Command: Sendable>: Sendable {
    private final class Node {
        let command: Command
        var next: UInt = 0

        init(_ command: Command) { self.command = command }

        /// The node pushed at `address`, with the retain its push took.
        static func taken(at address: UInt) -> Node {
            Unmanaged<Node>.fromOpaque(UnsafeRawPointer(bitPattern: address)!).takeRetainedValue()
        }
    }

    private static var closedBit: UInt { 1 }

    private let top = Atomic<UInt>(0)

    package init() {}

    deinit {
        var address = top.load(ordering: .acquiring) & ~Self.closedBit
        while address != 0 { address = Node.taken(at: address).next }
    }

    /// What a push found.
    package enum Pushed: Equatable {
        /// The queue held nothing before: its taker is to be woken.
        case first
        /// Others were waiting to be taken: a wake is on its way.
        case behindOthers
        /// Closed: the command was dropped.
        case refused
    }

    /// Pushes `command`; with `closing`, nothing more is accepted after it, but what comes
    /// `evenWhenClosed`.
    package func push(_ command: Command, closing: Bool = false, evenWhenClosed: Bool = false) -> Pushed {
        let node = Node(command)
        let address = UInt(bitPattern: Unmanaged.passRetained(node).toOpaque())
        var old = top.load(ordering: .relaxed)
        while true {
            let closed = old & Self.closedBit != 0
            if closed, !evenWhenClosed {
                _ = Node.taken(at: address)
                return .refused
            }
            node.next = old & ~Self.closedBit
            let new = address | (closed || closing ? Self.closedBit : 0)
            let (exchanged, found) = top.weakCompareExchange(
                expected: old,
                desired: new,
                successOrdering: .releasing,
                failureOrdering: .relaxed
            )
            if exchanged { return old & ~Self.closedBit == 0 ? .first : .behindOthers }
            old = found
        }
    }

    /// Takes every command pushed, in the order pushed (one sender's in its order; senders at once
    /// in the order their pushes landed).
    package func takeAll() -> [Command] {
        var old = top.load(ordering: .relaxed)
        while true {
            let (exchanged, found) = top.weakCompareExchange(
                expected: old,
                desired: old & Self.closedBit,
                successOrdering: .acquiring,
                failureOrdering: .relaxed
            )
            if exchanged { break }
            old = found
        }
        var address = old & ~Self.closedBit
        var taken: [Command] = []
        while address != 0 {
            let node = Node.taken(at: address)
            taken.append(node.command)
            address = node.next
        }
        taken.reverse()
        return taken
    }

    /// Whether the queue is closed.
    package var isClosed: Bool { top.load(ordering: .acquiring) & Self.closedBit != 0 }
}
