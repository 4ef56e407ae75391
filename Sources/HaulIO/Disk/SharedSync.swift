import CHaul
import Glibc

/// One `syncfs` at a time per file system, shared by every lane that needs one: a database's group
/// commit across threads.
///
/// A lane whose files are written needs a sync that starts after its writes. When none runs, it
/// starts one; when one runs (it may have started before the writes), it waits for the next, which
/// the first waiter to wake starts for all who wait meanwhile. So however many lanes finish files at
/// once, a file system sees at most one sync running and one waiting, and each covers every file
/// written before it started: about a quarter of the syncs of lanes that each sync on their own,
/// and faster (`Benchmarks/CHOICES.md`).
final class SharedSync: @unchecked Sendable {
    // @unchecked Sendable: `fileSystems` is touched only holding `mutex`.

    /// The one for the process: file systems are the process's to share.
    static let shared = SharedSync()

    private struct FileSystem {
        /// Syncs started (the one running is the last), and finished.
        var started: UInt64 = 0
        var finished: UInt64 = 0
        var running = false
        /// The last sync that failed (0: none).
        var lastFailure: UInt64 = 0

        /// A sync starts: its number.
        mutating func start() -> UInt64 {
            started += 1
            running = true
            return started
        }

        /// Sync `generation` ended.
        mutating func end(_ generation: UInt64, succeeded: Bool) {
            running = false
            finished = generation
            if !succeeded { lastFailure = generation }
        }
    }

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let finishedOne: UnsafeMutablePointer<pthread_cond_t>
    private var fileSystems: [UInt64: FileSystem] = [:]
    /// Threads waiting for a sync that another one runs.
    private var waiting = 0
    /// How `sync` makes a file system durable: `syncfs` (tests count and delay it).
    private let sync: @Sendable (Int32) -> Bool

    init(sync: @escaping @Sendable (Int32) -> Bool = { syncfsDescriptor($0) }) {
        self.sync = sync
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        finishedOne = .allocate(capacity: 1)
        pthread_cond_init(finishedOne, nil)
    }

    deinit {
        pthread_cond_destroy(finishedOne)
        pthread_mutex_destroy(mutex)
        finishedOne.deallocate()
        mutex.deallocate()
    }

    /// Makes everything written to the file system `device` before this call durable, by a sync
    /// started after it (by this thread, through `descriptor`, or by another waiting with it): whether
    /// every sync since then succeeded. A failure is the caller's to answer file by file.
    func sync(device: UInt64, descriptor: Int32) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        // The first sync to start from now on covers the caller's writes.
        let needed = fileSystems[device, default: FileSystem()].started + 1
        while true {
            let state = fileSystems[device, default: FileSystem()]
            if state.finished >= needed { return state.lastFailure < needed }
            if state.running {
                waiting += 1
                pthread_cond_wait(finishedOne, mutex)
                waiting -= 1
                continue
            }
            let generation = fileSystems[device, default: FileSystem()].start()
            pthread_mutex_unlock(mutex)
            let succeeded = sync(descriptor)
            pthread_mutex_lock(mutex)
            fileSystems[device, default: FileSystem()].end(generation, succeeded: succeeded)
            pthread_cond_broadcast(finishedOne)
        }
    }

    /// How many threads wait for a sync another one runs.
    var waitingThreads: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return waiting
    }
}

private func syncfsDescriptor(_ descriptor: Int32) -> Bool { CHaul_syncfs(descriptor) == 0 }
