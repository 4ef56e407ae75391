import HaulValues

/// Who may transfer now, as a pure value (no I/O): the slots and who holds them, the per-host counts
/// and the hosts at their limit, and which state directories' queues are worth reading (rows queued,
/// rows waiting for a host to free, retries waiting for their time). The ``Scheduler`` asks it before each admission and tells it what
/// happened; the rows themselves stay in the journals.
struct Admission {
    /// How many downloads may occupy a slot: ``DownloadManager/Configuration/maxConcurrentDownloads``,
    /// or fewer where the open-files limit is low (``DescriptorBudget``).
    let slots: Int
    /// How many downloads from one host may occupy a slot (``DownloadManager/Configuration/maxConcurrentDownloadsPerHost``).
    let perHostLimit: Int?

    /// The downloads that occupy a slot, with their hosts.
    private(set) var occupants: [DownloadID: String] = [:]
    /// Downloads whose bytes are all received, waiting on a disk lane (sync, check, rename): they
    /// hold no connection and no slot, so that a disk's sync latency does not idle the network; at
    /// most ``finishingLimit`` wait at once (past it, admission waits for the disk).
    private(set) var finishing: Set<DownloadID> = []
    /// How many downloads may wait on the disk at once.
    let finishingLimit: Int
    private var activeByHost: [String: Int] = [:]
    /// Hosts at their limit: the queue skips their rows.
    private(set) var saturatedHosts: Set<String> = []
    /// State directories whose journal may hold queued rows.
    private(set) var queuedDirectories: Set<String> = []
    /// Directories whose queue had rows only for saturated hosts: looked at again when one frees.
    private var directoriesWaitingForHosts: Set<String> = []
    /// Directories whose journal holds downloads waiting to retry, with the times they may run
    /// (seconds since 1970), latest first: each retry this manager set up, and the earliest one the
    /// journal named when it was read with nothing due.
    private var retryWakes: [String: [Double]] = [:]
    /// Directories whose every known retry time came, not read since: the journal may still hold
    /// rows waiting for later times that this manager did not set up (an earlier process's), so
    /// the next read asks it.
    private var wokenForRetry: Set<String> = []

    /// How many connections may be open at once (the open-files budget's share for sockets):
    /// slots and the extra connections of segmented downloads together.
    let connectionLimit: Int
    /// Connections beyond the first of downloads fetched over several (``Transfer/liveConnections``
    /// minus one), by download, by host, and in all.
    private var extras: [DownloadID: Int] = [:]
    private var extrasByHost: [String: Int] = [:]
    private var extraTotal = 0

    /// What HTTP/2 hosts' connections carry: downloads to them start as the grant allows.
    private(set) var grants: ConnectionGrants?

    init(
        slots: Int,
        perHostLimit: Int?,
        connectionLimit: Int = .max,
        finishingLimit: Int? = nil,
        streamsPerConnection: Int? = nil
    ) {
        self.slots = max(1, slots)
        self.finishingLimit = max(1, finishingLimit ?? slots)
        self.perHostLimit = perHostLimit.map { max(1, $0) }
        self.connectionLimit = max(1, connectionLimit)
        self.grants = streamsPerConnection.map {
            ConnectionGrants(streams: $0, mostAtOnce: min(self.slots, self.perHostLimit ?? self.slots))
        }
    }

    /// Whether `host` may take no more downloads now: its limit is reached, or its connections'
    /// grant says wait.
    private func isSaturated(_ host: String) -> Bool {
        if let perHostLimit, connections(to: host) >= perHostLimit { return true }
        return grants.map { !$0.mayStart(to: host) } ?? false
    }

    /// `host`'s standing follows what changed: skipped while saturated, read again once not.
    private mutating func refresh(_ host: String) {
        if isSaturated(host) {
            saturatedHosts.insert(host)
        } else {
            hostFreed(host)
        }
    }

    /// ``refresh(_:)``, and whether it freed `host` (it was saturated and is no longer).
    private mutating func refreshFreed(_ host: String) -> Bool {
        let was = saturatedHosts.contains(host)
        refresh(host)
        return was && !saturatedHosts.contains(host)
    }

    /// Connections to `host` now: one per slot occupied, and the extra ones.
    private func connections(to host: String) -> Int {
        activeByHost[host, default: 0] + extrasByHost[host, default: 0]
    }

    /// Whether another download may start now: a slot is free, and the disk keeps up.
    var hasFreeSlot: Bool { freeSlots > 0 }
    /// How many downloads hold a slot, and how many wait on the disk.
    var active: Int { occupants.count }
    var finishingCount: Int { finishing.count }
    /// Whether `id` holds a slot.
    func hasSlot(_ id: DownloadID) -> Bool { occupants[id] != nil }

    /// How many more downloads may start now (slots, the disk's share, connections).
    var freeSlots: Int {
        let connections = connectionLimit - occupants.count - extraTotal
        return max(0, min(slots - occupants.count, finishingLimit - finishing.count, connections))
    }

    /// Whether nothing is queued, waiting for a host or waiting to retry (transfers aside).
    var queuesAreEmpty: Bool {
        queuedDirectories.isEmpty && retryWakes.isEmpty && directoriesWaitingForHosts.isEmpty
    }

    // MARK: queues

    /// Rows were queued in `directory`'s journal.
    mutating func queueChanged(in directory: String) {
        queuedDirectories.insert(directory)
    }

    /// `directory`'s queue has nothing to admit now; `blockedByHosts` when it passed over rows of
    /// saturated hosts (it is looked at again when one of them frees).
    mutating func queueDrained(in directory: String, blockedByHosts: Bool = false) {
        queuedDirectories.remove(directory)
        if blockedByHosts { directoriesWaitingForHosts.insert(directory) }
    }

    /// Forgets every queue (a shutdown).
    mutating func forgetQueues() {
        queuedDirectories.removeAll()
        wokenForRetry.removeAll()
    }

    // MARK: slots

    /// `id`, from `host`, starts transferring: it occupies a slot (once, however often it starts a
    /// request) until ``stopTransferring(_:)``.
    /// `multiplexes`: its request may go over HTTP/2 (https, the manager offers it), so it takes
    /// part in its host's grant (``ConnectionGrants``).
    /// `now`: uptime nanoseconds (``ConnectionGrants/answerWait``).
    mutating func startTransferring(_ id: DownloadID, host: String, multiplexes: Bool = false, now: UInt64 = 0) {
        guard occupants[id] == nil else { return }
        occupants[id] = host
        activeByHost[host, default: 0] += 1
        if multiplexes { grants?.start(id, to: host, at: now) }
        if isSaturated(host) { saturatedHosts.insert(host) }
    }

    // MARK: connections of HTTP/2 hosts

    /// curl opened `socket`, the `order`-th, for `id`'s request.
    mutating func socketOpened(_ socket: Int32, by id: DownloadID, order: UInt64 = 0) {
        grants?.opened(socket, by: id, order: order)
    }

    /// curl closes `socket`. Returns whether a host's grant grew.
    mutating func socketClosing(_ socket: Int32) -> Bool {
        guard let host = grants?.closing(socket) else { return false }
        return refreshFreed(host)
    }

    /// `id`'s first answer came, over HTTP/2 or not, once curl had opened `socketsOpened` sockets.
    /// Returns whether its host may take more now.
    mutating func answered(_ id: DownloadID, multiplexes: Bool, socketsOpened: UInt64 = .max) -> Bool {
        guard grants?.answered(id, multiplexes: multiplexes, socketsOpened: socketsOpened) == true,
            let host = occupants[id]
        else { return false }
        return refreshFreed(host)
    }

    /// `id` was sent to another host, and curl let go of its stream here. Returns whether its host
    /// may take more now.
    mutating func leftHost(_ id: DownloadID) -> Bool {
        guard let host = grants?.leave(id) else { return false }
        return refreshFreed(host)
    }

    /// Hosts whose opener waited too long for an answer let their downloads go (``ConnectionGrants/expireWaits(now:)``).
    /// Returns whether any did.
    mutating func expireWaits(now: UInt64) -> Bool {
        guard let expired = grants?.expireWaits(now: now), !expired.isEmpty else { return false }
        for host in expired { refresh(host) }
        return true
    }

    /// Whether the next answer of a download to `host` is worth reporting: its host is granted.
    func grantsFollow(_ host: String) -> Bool {
        guard let grants else { return false }
        return grants.standing(of: host) != .serial
    }

    // MARK: connections of segmented downloads

    /// Whether `id`, with `live` connections open, may open one more: its first is its slot's; the
    /// others count against its host's limit and the connection budget, which they never exceed.
    func mayOpenConnection(for id: DownloadID, live: Int) -> Bool {
        guard let host = occupants[id] else { return false }
        if live == 0 { return true }
        if occupants.count + extraTotal >= connectionLimit { return false }
        if let perHostLimit, connections(to: host) >= perHostLimit { return false }
        return true
    }

    /// `id` has `live` connections open now.
    mutating func setConnections(_ id: DownloadID, _ live: Int) {
        guard let host = occupants[id] else { return }
        let new = max(0, live - 1)
        let old = extras[id] ?? 0
        guard new != old else { return }
        extras[id] = new > 0 ? new : nil
        let byHost = extrasByHost[host, default: 0] + new - old
        extrasByHost[host] = byHost > 0 ? byHost : nil
        extraTotal += new - old
        refresh(host)
    }

    /// `host` is below its limit again: the queues that passed over its rows are read again.
    private mutating func hostFreed(_ host: String) {
        if saturatedHosts.remove(host) != nil {
            queuedDirectories.formUnion(directoriesWaitingForHosts)
            directoriesWaitingForHosts.removeAll()
        }
    }

    /// `id` received all its bytes and waits on the disk: its slot, and its host's share, are free
    /// for the next download; it counts as finishing until ``stopTransferring(_:)``.
    mutating func startFinishing(_ id: DownloadID) {
        guard occupants[id] != nil else { return }
        stopTransferring(id)
        finishing.insert(id)
    }

    /// `id` paused or ended (or finished on the disk): its slot is free, and the queues waiting for
    /// its host are read again.
    mutating func stopTransferring(_ id: DownloadID) {
        finishing.remove(id)
        setConnections(id, 0)
        guard let host = occupants.removeValue(forKey: id) else { return }
        let remaining = (activeByHost[host] ?? 1) - 1
        activeByHost[host] = remaining > 0 ? remaining : nil
        _ = grants?.stop(id)
        if !isSaturated(host) { hostFreed(host) }
    }

    // MARK: retries

    /// A download in `directory` may retry at `time`: its queue is read again then. Every time is
    /// kept (once), not only the earliest: one download's wake-up must not stand for another's.
    mutating func wakeForRetry(in directory: String, at time: Double) {
        Self.insert(time, into: &retryWakes[directory, default: []])
    }

    /// Inserts `time` into `times` (latest first: the earliest is the last, taken off in O(1) when
    /// due), unless it is there.
    private static func insert(_ time: Double, into times: inout [Double]) {
        var low = 0
        var high = times.count
        while low < high {
            let middle = (low + high) / 2
            if times[middle] > time { low = middle + 1 } else { high = middle }
        }
        guard low == times.count || times[low] != time else { return }
        times.insert(time, at: low)
    }

    /// The earliest time a queue is to be read again for a retry.
    var nextRetryWake: Double? { retryWakes.values.compactMap(\.last).min() }

    /// It is `now`: the queues whose retries are due are read again.
    mutating func retriesDue(at now: Double) {
        for (directory, times) in retryWakes {
            guard let earliest = times.last, earliest <= now + 0.001 else { continue }
            var left = times
            while let time = left.last, time <= now + 0.001 { left.removeLast() }
            if left.isEmpty {
                retryWakes[directory] = nil
                wokenForRetry.insert(directory)
            } else {
                retryWakes[directory] = left
            }
            queuedDirectories.insert(directory)
        }
    }

    /// Whether every known retry time of `directory` came since it was last read (and now is).
    mutating func takeWokenForRetry(_ directory: String) -> Bool {
        wokenForRetry.remove(directory) != nil
    }
}
