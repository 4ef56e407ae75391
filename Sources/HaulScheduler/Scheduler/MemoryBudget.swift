import HaulIO

/// How much memory a manager's transfers may take in buffers, and how many may wait on the disk,
/// from the number of slots: read once, when the manager is made (``DownloadManager``).
package enum MemoryBudget {
    /// curl's receive buffer for each transfer when `slots` may run at once: a share of
    /// ``receiveBufferBudget``, between curl's default 16 KiB and 512 KiB. A manager of a few
    /// transfers reads in large chunks, as the curl tool does with its 100 KiB (each read of 16 KiB
    /// costs a `recvfrom` and a zero-timeout `poll`: 131,000 system calls per GiB, 4,100 at 512 KiB);
    /// one of many transfers keeps curl's 16 KiB each. By the slots, not by the transfers running
    /// now: the first transfers of a busy manager would otherwise all start with large buffers.
    package static func receiveBufferSize(slots: Int) -> Int {
        let share = receiveBufferBudget / max(1, slots)
        let size = share / EasyHandle.defaultReceiveBufferSize * EasyHandle.defaultReceiveBufferSize
        return min(512 * 1024, max(EasyHandle.defaultReceiveBufferSize, size))
    }
    static let receiveBufferBudget = 1024 * 1024

    /// How many write buffers may be in use at once when `slots` may run: one per slot, within
    /// ``writeBufferBudget`` (and at least ``writeBufferFloor``'s worth, 4 at least). Transfers that
    /// receive while all are in use write each chunk straight to their partial file instead.
    ///
    /// One per slot, because 100 small downloads at once all receive at once: with fewer, most files
    /// are written by the loop a chunk at a time; twice as many was no faster and took more memory
    /// (a buffer's pages are touched as bytes arrive, and one idle for a trim period is unmapped).
    /// The numbers: `Benchmarks/CHOICES.md`.
    package static func writeBufferLimit(bufferSize: Int, slots: Int) -> Int {
        let size = max(1, bufferSize)
        return max(4, min(max(slots, writeBufferFloor / size), writeBufferBudget / size))
    }
    /// How many downloads whose bytes are all received may wait on the disk lanes at once (holding
    /// no slot) before admission waits for the disk: twice the slots, so that the network goes on
    /// while a sync runs, within half the partial files' share of the descriptor budget (a finishing
    /// download may hold its partial file's descriptor, not its socket).
    ///
    /// With as many as the slots, a `syncfs` of a few milliseconds filled them and admission waited
    /// for the disk; twice as many was faster on ext4, four and eight times no faster, and tmpfs
    /// did not change (`Benchmarks/CHOICES.md`).
    package static func finishingLimit(slots: Int, openPartialFiles: Int) -> Int {
        min(2 * max(1, slots), max(1, openPartialFiles / 2))
    }

    /// The most memory write buffers may take at once (128 of the default 128 KiB).
    static let writeBufferBudget = 16 * 1024 * 1024
    /// What write buffers may take whatever the slots (16 of the default 128 KiB).
    static let writeBufferFloor = 2 * 1024 * 1024
}
