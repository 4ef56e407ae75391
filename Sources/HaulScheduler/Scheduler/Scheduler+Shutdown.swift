import Glibc
import HaulIO
import HaulValues

/// The manager shuts down, on the loop (what callers ask of their downloads: ``Controls``).
extension Scheduler {
    /// Pauses every transfer (interrupted, not paused: the next manager on the journal continues
    /// them) and stops the loop once their syncs are recorded.
    func shutdown() {
        pool.beginShutdown()
        callers.beginShutdown()
        for transfer in pool.admitted {
            // Interrupted, not paused: the next manager continues it.
            perform(transfer.apply(.shutdown), for: transfer)
        }
        // The pauses above asked for syncs; the journals close once those are recorded.
        if pool.shutdownEnds(diskPending: disk.pending) { finishShutdown() }
    }

    func finishShutdown() {
        let handles = pool.end().map(\.handle) + catalog.liveHandles
        for download in handles {
            download.hub.close(with: DownloadError(code: .shutdown, url: download.url.redactedString))
        }
        reactorTurnDidEnd(reactor)
        catalog.closeJournals()
        catalog.feed.close()
        catalog.resumeIdleWaiters()
        callers.answerEveryWaiter()
        // Every easy handle goes before the share they use.
        environment.easyHandles.close()
        reactor.stop()
    }
}
