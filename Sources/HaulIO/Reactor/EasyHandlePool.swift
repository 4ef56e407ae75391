import CHaul
import HaulValues

/// Easy handles of ended transfers, reset and kept for the next ones, and the `CURLSH` they all share
/// (TLS sessions and DNS answers). Loop thread only.
///
/// As many handles are kept as transfers may run at once, and freed after a whole idle period
/// (``trim()``). When only 64 were kept, a burst of finished transfers freed its handles and the next
/// ones created new: 2,552 new handles for 10,000 downloads at 100 at once.
package final class EasyHandlePool {
    /// What every handle sets the same way (``EasyHandle/Options``), the share included.
    package let options: EasyHandle.Options
    /// curl's receive buffer for every handle taken from the pool.
    let receiveBufferSize: Int
    private var idle: IdleStack<EasyHandle>
    /// Set once ``close()`` freed the share; a pool never closed frees it in deinit.
    private var closed = false

    /// - Parameters:
    ///   - options: every handle's options; its `share` is replaced by the pool's own.
    ///   - receiveBufferSize: `CURLOPT_BUFFERSIZE` of every handle.
    ///   - keeping: how many idle handles are kept at most.
    package init(options: EasyHandle.Options, receiveBufferSize: Int, keeping: Int) {
        var options = options
        let share = curl_share_init()
        if let share {
            _ = CHaul_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
            _ = CHaul_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
        }
        options.share = share
        self.options = options
        self.receiveBufferSize = receiveBufferSize
        self.idle = IdleStack(limit: keeping)
    }

    deinit {
        // Only a pool whose loop never ran gets here with its share (no easy handle uses it).
        if !closed, let share = options.share { curl_share_cleanup(share) }
    }

    /// An idle handle, or a new one; `nil` when curl cannot make one.
    package func take() -> EasyHandle? {
        guard let easy = idle.pop() ?? EasyHandle() else { return nil }
        easy.setReceiveBufferSize(receiveBufferSize)
        return easy
    }

    /// Keeps a handle that left the multi handle for the next transfer.
    package func recycle(_ easy: EasyHandle) {
        guard idle.items.count < idle.limit else { return }
        easy.reset()
        _ = idle.push(easy)
    }

    /// Frees the handles that stayed idle a whole period (their deinit cleans them up, on this thread).
    package func trim() {
        _ = idle.trim()
    }

    /// Frees every handle, then the share they used. Call once no transfer runs.
    package func close() {
        _ = idle.removeAll()
        if let share = options.share { curl_share_cleanup(share) }
        closed = true
    }
}
