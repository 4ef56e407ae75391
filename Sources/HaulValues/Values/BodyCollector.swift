import FoundationEssentials
import Glibc
import Synchronization

/// A body asked for in memory (``DownloadManager/data(from:headers:maximumSize:)``): filled on the
/// loop thread as it arrives (``StreamTarget``), emptied when the server sends it from its start
/// again, taken whole by the caller once the download completed.
///
/// One `malloc`ed block, sized once when the answer announces its length (at most ``maximum``) and
/// doubled otherwise, handed to the caller's `Data` without a copy. (An array that grew by doubling
/// and was then copied into a `Data` cost a quarter of the loop thread's time over 10,000 bodies of
/// 64 KiB: three copies and their page faults per body.)
package final class BodyCollector: Sendable {
    /// The most bytes accepted: a longer body fails the download (`.fileTooLarge`).
    package let maximum: Int64
    private let storage = Mutex(Storage())

    // @unchecked Sendable: the block is reached only under the mutex, and handed away whole.
    private struct Storage: @unchecked Sendable {
        var bytes: UnsafeMutableRawPointer?
        var count = 0
        var capacity = 0

        /// Room for `capacity` bytes in all; false when memory ran out.
        mutating func grow(to capacity: Int) -> Bool {
            guard capacity > self.capacity else { return true }
            if bytes == nil, let block = BodyBlocks.shared.take(atLeast: capacity) {
                (bytes, self.capacity) = (block.pointer, block.capacity)
                return true
            }
            guard let grown = realloc(bytes, capacity) else { return false }
            (bytes, self.capacity) = (grown, capacity)
            return true
        }
    }

    package init(maximum: Int64) {
        self.maximum = maximum
    }

    deinit {
        storage.withLock { free($0.bytes) }
    }

    /// The answer announced `length` bytes: room for them at once (never more than ``maximum``).
    package func expect(_ length: Int64) {
        let wanted = Int(min(max(0, length), maximum))
        storage.withLock { _ = $0.grow(to: wanted) }
    }

    /// Appends `chunk`; false when memory for it could not be had.
    @discardableResult
    package func append(_ chunk: UnsafeRawBufferPointer) -> Bool {
        guard let source = chunk.baseAddress, chunk.count > 0 else { return true }
        return storage.withLock { storage in
            let needed = storage.count + chunk.count
            if needed > storage.capacity, !storage.grow(to: max(needed, storage.capacity * 2, 16 * 1024)) {
                return false
            }
            (storage.bytes! + storage.count).copyMemory(from: source, byteCount: chunk.count)
            storage.count = needed
            return true
        }
    }

    /// A copy of the bytes collected from `offset` on (what a resume without a validator compares
    /// the server's answer with); `nil` when `offset` is past them.
    package func bytes(from offset: Int) -> [UInt8]? {
        storage.withLock { storage -> [UInt8]? in
            guard offset >= 0, offset <= storage.count else { return nil }
            guard let base = storage.bytes, offset < storage.count else { return [] }
            return Array(UnsafeRawBufferPointer(start: base + offset, count: storage.count - offset))
        }
    }

    /// Whether `bytes` are the ones collected at `offset`.
    package func holds(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Bool {
        storage.withLock { storage in
            guard offset >= 0, offset + bytes.count <= storage.count else { return false }
            guard let base = storage.bytes, bytes.count > 0 else { return true }
            return memcmp(base + offset, bytes.baseAddress!, bytes.count) == 0
        }
    }

    /// The body starts again from its first byte.
    package func reset() {
        storage.withLock { $0.count = 0 }
    }

    /// The body, which the collector no longer holds.
    package func take() -> Data {
        storage.withLock { storage in
            defer { storage = Storage() }
            guard let bytes = storage.bytes, storage.count > 0 else {
                free(storage.bytes)
                return Data()
            }
            let capacity = storage.capacity
            // Its block goes back to the blocks kept for the next bodies when the caller drops it.
            return Data(
                bytesNoCopy: bytes,
                count: storage.count,
                deallocator: .custom { pointer, _ in BodyBlocks.shared.give(pointer, capacity: capacity) }
            )
        }
    }
}

/// The blocks of bodies in memory that their callers let go, kept (up to ``limit`` bytes in all) for
/// the next bodies of about their size: a fresh `malloc`ed block's pages fault in as the body is
/// copied into them, and the caller's `free` gives them back to the system (the heap's top is
/// trimmed), so that each 64 KiB body cost 16 page faults on the loop thread, 4 % of its time in
/// (k). Any thread.
final class BodyBlocks: Sendable {
    static let shared = BodyBlocks(limit: 8 * 1024 * 1024)

    /// The most bytes kept.
    let limit: Int
    private let kept = Mutex(Kept())
    /// How many bytes of released bodies it keeps now.
    var keptBytes: Int { kept.withLock { $0.bytes } }

    // @unchecked Sendable: the blocks are reached only under the mutex, and each handed away whole.
    struct Kept: @unchecked Sendable {
        var blocks: [(pointer: UnsafeMutableRawPointer, capacity: Int)] = []
        var bytes = 0
    }

    init(limit: Int) {
        self.limit = limit
    }

    deinit {
        kept.withLock { for block in $0.blocks { free(block.pointer) } }
    }

    /// A kept block of `capacity` bytes or up to twice as many, the newest first; `nil` when none is.
    func take(atLeast capacity: Int) -> (pointer: UnsafeMutableRawPointer, capacity: Int)? {
        kept.withLock { kept in
            guard let index = kept.blocks.lastIndex(where: { $0.capacity >= capacity && $0.capacity <= 2 * capacity })
            else { return nil }
            let block = kept.blocks.remove(at: index)
            kept.bytes -= block.capacity
            return block
        }
    }

    /// Keeps a block for the next body, or frees it when the blocks kept would pass ``limit`` (a
    /// block of more than an eighth of it is freed at once).
    func give(_ pointer: UnsafeMutableRawPointer, capacity: Int) {
        let keptIt = kept.withLock { kept -> Bool in
            guard capacity <= limit / 8, kept.bytes + capacity <= limit else { return false }
            kept.blocks.append((pointer, capacity))
            kept.bytes += capacity
            return true
        }
        if !keptIt { free(pointer) }
    }
}
