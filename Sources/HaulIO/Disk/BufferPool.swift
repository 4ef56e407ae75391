import Glibc
import HaulValues
import Synchronization

/// Write buffers of one size, reused across transfers: a transfer takes one when its first bytes
/// arrive and gives it back when it stops or turns slow (or the disk thread gives it back once it
/// wrote the last bytes of a finished download). A new buffer per download meant two system calls and
/// a page fault per 4 KiB touched.
///
/// Buffers are mapped with `mmap` and unmapped once they sat idle for a whole period between two
/// ``trim()`` calls (the scheduler trims every 250 ms): from malloc, a freed 128 KiB block stays in the
/// heap (glibc raises its mmap threshold after the first free), so thousands of slow transfers giving
/// their buffers back left the process as large as when they all held one. Unmapping as soon as more
/// than a few were idle instead cost an `munmap`, an `mmap` and a page fault per 4 KiB for every
/// download of a busy manager, whose finished downloads give buffers back in bursts.
///
/// At most ``limit`` buffers are in use at once: a transfer that finds none writes each chunk
/// straight to its file until one is free. Without a limit, the first turn of a busy manager (100
/// responses arriving together) touched a buffer per transfer, and the process kept those pages
/// for its whole life (a pool keeps idle buffers mapped) although later turns used fewer than ten.
package final class BufferPool: Sendable {
    package let bufferSize: Int
    /// How many buffers may be in use at once.
    package let limit: Int
    private let inUse = Atomic<Int>(0)
    private let peak = Atomic<Int>(0)

    /// A buffer no one uses, which may move to another thread.
    struct IdleBuffer: @unchecked Sendable {
        let memory: UnsafeMutableRawBufferPointer
    }
    private let idle: Mutex<IdleStack<IdleBuffer>>

    /// - Parameters:
    ///   - idleLimit: how many idle buffers are kept at most; more are freed at once.
    ///   - limit: how many buffers may be in use at once.
    package init(bufferSize: Int, idleLimit: Int, limit: Int = .max) {
        self.bufferSize = bufferSize
        self.limit = limit
        idle = Mutex(IdleStack(limit: idleLimit))
    }

    deinit {
        for buffer in idle.withLock({ $0.removeAll() }) { Self.unmap(buffer.memory) }
    }

    /// How many buffers are in use now, and at most so far.
    package var inUseCount: Int { inUse.load(ordering: .relaxed) }
    package var peakInUseCount: Int { peak.load(ordering: .relaxed) }
    /// How many idle buffers it keeps now.
    package var idleCount: Int { idle.withLock { $0.items.count } }

    /// An idle buffer, or a new one; `nil` when ``limit`` buffers are in use or no memory can be
    /// mapped (the caller writes unbuffered). `beyondLimit` ignores the limit (for a copy that cannot wait).
    func take(beyondLimit: Bool = false) -> UnsafeMutableRawBufferPointer? {
        let count = inUse.add(1, ordering: .relaxed).newValue
        if count > limit && !beyondLimit {
            inUse.subtract(1, ordering: .relaxed)
            return nil
        }
        peak.max(count, ordering: .relaxed)
        let reused = idle.withLock { $0.pop() }
        if let reused { return reused.memory }
        let address = mmap(nil, bufferSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let address, address != MAP_FAILED else {
            inUse.subtract(1, ordering: .relaxed)
            return nil
        }
        return UnsafeMutableRawBufferPointer(start: address, count: bufferSize)
    }

    func give(_ buffer: UnsafeMutableRawBufferPointer) {
        inUse.subtract(1, ordering: .relaxed)
        let kept = idle.withLock { $0.push(IdleBuffer(memory: buffer)) }
        if !kept { Self.unmap(buffer) }
    }

    /// Frees the buffers that stayed idle since the last trim: how many.
    @discardableResult
    package func trim() -> Int {
        let unused = idle.withLock { $0.trim() }
        for buffer in unused { Self.unmap(buffer.memory) }
        return unused.count
    }

    private static func unmap(_ buffer: UnsafeMutableRawBufferPointer) {
        munmap(buffer.baseAddress, buffer.count)
    }
}
