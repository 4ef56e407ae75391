import Synchronization

/// Write buffers of one size, reused across transfers: a transfer takes one when its first bytes
/// arrive and gives it back when it stops (or the disk thread gives it back once it wrote the last
/// bytes of a finished download). At 128 KiB, glibc serves each fresh allocation with its own mmap:
/// a new buffer per download meant two system calls and a page fault per 4 KiB touched.
final class BufferPool: Sendable {
    let bufferSize: Int
    /// How many idle buffers are kept; more are freed.
    let idleLimit: Int

    /// A buffer no one uses, which may move to another thread.
    private struct IdleBuffer: @unchecked Sendable {
        let memory: UnsafeMutableRawBufferPointer
    }
    private struct Idle: ~Copyable {
        var buffers: [IdleBuffer] = []
    }
    private let idle = Mutex(Idle())

    init(bufferSize: Int, idleLimit: Int) {
        self.bufferSize = bufferSize
        self.idleLimit = idleLimit
    }

    deinit {
        idle.withLock { idle in
            for buffer in idle.buffers { buffer.memory.deallocate() }
        }
    }

    func take() -> UnsafeMutableRawBufferPointer {
        idle.withLock { $0.buffers.popLast() }?.memory ?? .allocate(byteCount: bufferSize, alignment: 16)
    }

    func give(_ buffer: UnsafeMutableRawBufferPointer) {
        let returned = IdleBuffer(memory: buffer)
        let kept = idle.withLock { idle in
            guard idle.buffers.count < idleLimit else { return false }
            idle.buffers.append(returned)
            return true
        }
        if !kept { buffer.deallocate() }
    }
}
