/// How much memory a manager's transfers may take in buffers, from the number of slots.
extension Scheduler {
    /// curl's receive buffer for each transfer when `slots` may run at once: a share of
    /// ``receiveBufferBudget``, between curl's default 16 KiB and 512 KiB. A manager of a few
    /// transfers reads in large chunks, as the curl tool does with its 100 KiB (each read of 16 KiB
    /// costs a `recvfrom` and a zero-timeout `poll`: 131,000 system calls per GiB, 4,100 at 512 KiB);
    /// one of many transfers keeps curl's 16 KiB each. By the slots, not by the transfers running
    /// now: the first transfers of a busy manager would otherwise all start with large buffers.
    static func receiveBufferSize(slots: Int) -> Int {
        let share = receiveBufferBudget / max(1, slots)
        let size = share / EasyHandle.defaultReceiveBufferSize * EasyHandle.defaultReceiveBufferSize
        return min(512 * 1024, max(EasyHandle.defaultReceiveBufferSize, size))
    }
    static let receiveBufferBudget = 1024 * 1024

    /// How many write buffers may be in use at once: ``writeBufferBudget`` worth, at least 4.
    static func writeBufferLimit(bufferSize: Int) -> Int {
        max(4, writeBufferBudget / max(1, bufferSize))
    }
    /// The memory write buffers may take at once (2 MiB: 16 of the default 128 KiB). Transfers that
    /// receive while all are in use write each chunk straight to their partial file instead.
    static let writeBufferBudget = 2 * 1024 * 1024
}
