import HaulIO

/// A caller that awaits a control (`await download.pause()`, `resume()`, `cancel()`): answered with
/// the download's state once what it asked for holds, or at once when it cannot happen.
struct SettleWaiter {
    /// The download asked.
    let handle: LiveDownload
    let control: DownloadControl
    let answer: @Sendable (DownloadState) -> Void
}

/// Controls that settle: the loop carries a control out as it does any, then answers its caller
/// when the state it asked for holds: paused with the bytes it kept synced and recorded (or ended
/// meanwhile), cancelled (or ended), queued again or running. A control that changes nothing (the
/// row is another process's, the download had ended) is answered at once, with the state it is in.
extension Scheduler {
    func settle(
        _ download: LiveDownload,
        _ control: DownloadControl,
        answer: @escaping @Sendable (DownloadState) -> Void
    ) {
        switch control {
        case .pause: pause(download)
        case .resume: resume(download)
        case .cancel: cancel(download)
        case .limitRate, .handedOver:
            answer(download.state)
            return
        }
        let waiter = SettleWaiter(handle: download, control: control, answer: answer)
        let id = download.id
        // Nothing of it runs, is followed or is being synced here, and it is not what was asked
        // (its row is another process's, it had ended): nothing will change.
        if isSettled(waiter)
            || (admitted(id) == nil && !follower.isFollowing(id) && !environment.syncs.isPending(id))
        {
            answer(download.state)
        } else {
            pool.wait(waiter)
        }
    }

    /// Whether what `waiter` asked for holds now.
    func isSettled(_ waiter: SettleWaiter) -> Bool {
        let id = waiter.handle.id
        let state = waiter.handle.state
        switch waiter.control {
        case .pause:
            guard admitted(id) == nil, !environment.syncs.isPending(id) else { return false }
            if case .paused = state { return true }
            return state.isFinal
        case .cancel:
            return state.isFinal
        case .resume, .limitRate, .handedOver:
            return true
        }
    }

    /// At a turn's end, once its rows are committed: the waiters whose control settled are answered.
    func answerSettledWaiters() {
        // Taken out first: whether one settled is read from the pool, which may not be read while
        // it changes.
        for waiter in pool.takeAllWaiters() {
            if isSettled(waiter) { waiter.answer(waiter.handle.state) } else { pool.wait(waiter) }
        }
    }

    /// The manager stopped: every waiter is answered with the state its download is in.
    func answerEveryWaiter() {
        for waiter in pool.takeAllWaiters() { waiter.answer(waiter.handle.state) }
    }
}
