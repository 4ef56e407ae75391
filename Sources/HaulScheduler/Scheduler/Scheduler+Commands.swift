import Glibc
import HaulIO
import HaulValues

/// What callers ask of downloads (rows written, pause, resume, cancel) and of the manager (shut
/// down), on the loop.
extension Scheduler {
    func pause(_ download: LiveDownload) {
        if let transfer = admitted(download.id) {
            perform(transfer.apply(pool.isShuttingDown ? .shutdown : .pause), for: transfer)
            return
        }
        if follower.stop(download, cancelled: false) { return }
        // Queued, waiting or interrupted: only its row changes.
        updateRow(of: download, on: .paused) { record in
            download.hub.publish(.paused(record.progress))
        }
    }

    func resume(_ download: LiveDownload) {
        if admitted(download.id) != nil { return }  // admitted: it is not paused
        if follower.followIfAnothers(download) { return }
        updateRow(of: download, on: .resumed(sequence: catalog.nextQueueSequence())) { _ in
            download.hub.publish(.queued)
        }
        pool.queueChanged(in: download.stateDirectoryPath)
    }

    /// A download's own rate limit: at once when it runs (and in its row, for later attempts).
    func limitRate(of download: LiveDownload, to rate: Int64?) {
        if let transfer = admitted(download.id) {
            perform(transfer.apply(.limitRate(rate)), for: transfer)
            return
        }
        RowControls(catalog: catalog, logger: logger).setRateLimit(rate, of: download)
    }

    func cancel(_ download: LiveDownload) {
        if let transfer = admitted(download.id) {
            perform(transfer.apply(.cancel), for: transfer)
            return
        }
        if follower.stop(download, cancelled: true) {
            forget(download.id)
            return
        }
        updateRow(of: download, on: .cancelled) { _ in
            forget(download.id)
            download.hub.publish(.cancelled)
        }
    }

    /// A paused download whose row another manager took (``DownloadManager/handOver(_:to:)``): it
    /// goes on there, and ends here as cancelled.
    func handedOver(_ download: LiveDownload) {
        guard admitted(download.id) == nil else { return }  // asked for again meanwhile: it runs here
        forget(download.id)
        download.hub.publish(.cancelled)
    }

    /// Applies `event` to the row of a download that is not admitted (``RowControls``).
    private func updateRow(of download: LiveDownload, on event: QueueEvent, _ changed: (JournalRow) -> Void) {
        RowControls(catalog: catalog, logger: logger).apply(event, to: download, changed)
    }

    /// Pauses every transfer (interrupted, not paused: the next manager on the journal continues
    /// them) and stops the loop once their syncs are recorded.
    func shutdown() {
        pool.beginShutdown()
        follower.stop()
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
        answerEveryWaiter()
        // Every easy handle goes before the share they use.
        environment.easyHandles.close()
        reactor.stop()
    }
}
