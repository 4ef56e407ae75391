import CHaul
import Dispatch
import HaulIO
import HaulValues

/// Shares bandwidth out: a token bucket for the whole manager, one per host and one per limited
/// download (``RateLimits``). A transfer whose buckets are in debt is held: its write callback
/// answers `CURL_WRITEFUNC_PAUSE` (curl keeps the chunk and gives it again later), and one timer on
/// the loop lets held requests go once their debts are paid. No busy loop: the timer fires when
/// the first debt is paid, at most every 5 ms. (curl's `CURLOPT_MAX_RECV_SPEED_LARGE` limits one
/// handle; a budget shared by many needs this.) Loop thread only.
package final class RateLimiter {
    private let reactor: Reactor
    private(set) var limits: RateLimits
    private var total: TokenBucket?
    private var hosts: [String: TokenBucket] = [:]
    private var downloads: [DownloadID: TokenBucket] = [:]
    /// Limits of downloads of their own (``DownloadRequest/maxBytesPerSecond``), by id, while admitted.
    private var ownLimits: [DownloadID: Int64] = [:]
    /// Requests curl holds paused for it: a transfer's own, or one of its other connections.
    private var held: [ObjectIdentifier: Connection] = [:]
    private var timer: OpaquePointer?
    private var timerArmed = false

    init(reactor: Reactor, limits: RateLimits) {
        self.reactor = reactor
        self.limits = limits.normalized
        let now = reactor.clock.uptimeNanoseconds
        total = self.limits.total.map { TokenBucket(rate: $0, now: now) }
    }

    /// Whether no limit is set at all: transfers then never look at a clock for it.
    var isIdle: Bool { total == nil && limits.perHost == nil && downloads.isEmpty }

    /// The smallest limit that applies to `transfer`, if any: its receive buffer is kept below a
    /// twentieth of it, so that one chunk never overshoots a window by much.
    func smallestLimit(for transfer: Transfer) -> Int64? {
        [limits.total, limits.perHost, downloads[transfer.id].map { Int64($0.rate) }].compactMap { $0 }.min()
    }

    /// A transfer was admitted: its own limit, or the default per download, takes effect.
    package func admit(_ transfer: Transfer, ownLimit: Int64?) {
        if let ownLimit { ownLimits[transfer.id] = max(1, ownLimit) }
        applyDownloadLimit(transfer.id, now: reactor.clock.uptimeNanoseconds)
    }

    /// Gives download `id` the bucket of its own limit, else of the default per download, or none.
    private func applyDownloadLimit(_ id: DownloadID, now: UInt64) {
        guard let rate = ownLimits[id] ?? limits.perDownload else {
            downloads[id] = nil
            return
        }
        if downloads[id] == nil {
            downloads[id] = TokenBucket(rate: rate, now: now)
        } else {
            downloads[id]!.setRate(rate, now: now)
        }
    }

    /// A transfer ended or paused: it is neither limited nor held any more.
    package func release(_ transfer: Transfer) {
        downloads[transfer.id] = nil
        ownLimits[transfer.id] = nil
        held[ObjectIdentifier(transfer.own)] = nil
        for connection in transfer.segments?.others ?? [] { held[ObjectIdentifier(connection)] = nil }
    }

    /// Whether `transfer`'s next bytes must wait.
    func mustWait(_ transfer: Transfer, now: UInt64) -> Bool {
        var waits = false
        if total != nil { waits = total!.mustWait(now: now) || waits }
        if let perHost = limits.perHost {
            waits = hosts[transfer.hostKey, default: TokenBucket(rate: perHost, now: now)].mustWait(now: now) || waits
        }
        if downloads[transfer.id] != nil { waits = downloads[transfer.id]!.mustWait(now: now) || waits }
        return waits
    }

    /// `bytes` of `transfer` passed.
    func took(_ bytes: Int, by transfer: Transfer, now: UInt64) {
        total?.take(bytes, now: now)
        if let perHost = limits.perHost {
            hosts[transfer.hostKey, default: TokenBucket(rate: perHost, now: now)].take(bytes, now: now)
        }
        downloads[transfer.id]?.take(bytes, now: now)
    }

    /// The request on `connection` is held (its write callback answers `CURL_WRITEFUNC_PAUSE`): it is
    /// let go once its transfer's debts are paid.
    func hold(_ connection: Connection) {
        connection.heldBy = .rateLimiter
        held[ObjectIdentifier(connection)] = connection
        armTimer()
    }

    /// The request on `connection` stopped while held: nothing to let go.
    func forget(_ connection: Connection) {
        held[ObjectIdentifier(connection)] = nil
    }

    /// New limits for the manager, from now on, for the `admitted` downloads too (a download's own
    /// limit stays).
    package func setLimits(_ new: RateLimits, admitted: some Sequence<DownloadID>) {
        let now = reactor.clock.uptimeNanoseconds
        limits = new.normalized
        if let rate = limits.total {
            if total == nil { total = TokenBucket(rate: rate, now: now) } else { total!.setRate(rate, now: now) }
        } else {
            total = nil
        }
        if let rate = limits.perHost {
            for key in hosts.keys { hosts[key]!.setRate(rate, now: now) }
        } else {
            hosts = [:]
        }
        // Every admitted download, the ones without a bucket yet included: a default per download set
        // now applies to downloads that ran unlimited.
        for id in admitted where ownLimits[id] == nil { applyDownloadLimit(id, now: now) }
        letGoPaidUp()
    }

    /// A limit of its own for the admitted download `transfer` (`nil`: the default per download).
    func setLimit(_ rate: Int64?, for transfer: Transfer) {
        let now = reactor.clock.uptimeNanoseconds
        ownLimits[transfer.id] = rate.map { max(1, $0) }
        applyDownloadLimit(transfer.id, now: now)
        letGoPaidUp()
    }

    private func armTimer() {
        if timer == nil { timer = reactor.makeOneShotTimer { [unowned self] in letGoPaidUp() } }
        guard let timer, !timerArmed else { return }
        var wait: UInt64 = 100_000_000  // looked at again at least every 100 ms
        for bucket in [total].compactMap({ $0 }) + Array(hosts.values) + Array(downloads.values) where bucket.wait > 0 {
            wait = min(wait, bucket.wait)
        }
        timerArmed = true
        reactor.arm(timer, after: .nanoseconds(Int64(max(wait, 5_000_000))))
    }

    /// Lets go the held requests whose transfers' debts are paid (``Connection/letGo(by:)``); waits again for the others.
    private func letGoPaidUp() {
        timerArmed = false
        let now = reactor.clock.uptimeNanoseconds
        for (key, connection) in held where !mustWait(connection.transfer, now: now) {
            held[key] = nil
            connection.letGo(by: .rateLimiter)
        }
        if !held.isEmpty { armTimer() }
    }
}
