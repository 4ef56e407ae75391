import CHaul
import Glibc

/// A recursive pthread mutex: the journal's lock, which the loop thread keeps across a whole loop
/// turn while it also takes it per statement.
package final class RecursiveLock: @unchecked Sendable {
    // @unchecked Sendable: the mutex is the synchronisation; it lives at a fixed heap address.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init() {
        mutex = .allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
        let status = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }

    /// Takes the lock, trying it `spins` times first (with a pause between tries) before sleeping
    /// on it: for a lock held only for a few microseconds at a time, where sleeping and being woken
    /// costs a thread more than the wait.
    package func lock(spinning spins: Int) {
        for _ in 0..<spins {
            if pthread_mutex_trylock(mutex) == 0 { return }
            CHaul_spin_pause()
        }
        pthread_mutex_lock(mutex)
    }

    /// Takes the lock if no other thread holds it.
    package func `try`() -> Bool { pthread_mutex_trylock(mutex) == 0 }

    package func unlock() { pthread_mutex_unlock(mutex) }
}
