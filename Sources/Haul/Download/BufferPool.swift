/// Write buffers of one size, reused across transfers: a transfer takes one when its first bytes
/// arrive and gives it back when it stops. (At 128 KiB, glibc serves each fresh allocation with its
/// own mmap: a new buffer per download meant two system calls and a page fault per 4 KiB touched.)
/// Loop thread only.
final class BufferPool {
    let bufferSize: Int
    /// How many idle buffers are kept; more are freed.
    let idleLimit: Int
    private var idle: [UnsafeMutableRawBufferPointer] = []

    init(bufferSize: Int, idleLimit: Int) {
        self.bufferSize = bufferSize
        self.idleLimit = idleLimit
    }

    deinit {
        for buffer in idle { buffer.deallocate() }
    }

    func take() -> UnsafeMutableRawBufferPointer {
        idle.popLast() ?? .allocate(byteCount: bufferSize, alignment: 16)
    }

    func give(_ buffer: UnsafeMutableRawBufferPointer) {
        if idle.count < idleLimit {
            idle.append(buffer)
        } else {
            buffer.deallocate()
        }
    }
}
