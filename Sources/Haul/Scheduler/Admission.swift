/// Who may transfer now, as a pure value (no I/O): the slots and who holds them, the per-host counts
/// and the hosts at their limit, and which state directories' queues are worth reading (rows queued,
/// rows waiting for a host to free, retries waiting for their time). The ``Scheduler`` asks it before each admission and tells it what
/// happened; the rows themselves stay in the journals.
struct Admission {
    /// How many downloads may hold a slot: ``DownloadManager/Configuration/maxConcurrentDownloads``,
    /// or fewer where the open-files limit is low (``DescriptorBudget``).
    let slots: Int
    /// How many downloads from one host may hold a slot (``DownloadManager/Configuration/maxConcurrentDownloadsPerHost``).
    let perHostLimit: Int?

    /// The slots held, by download, with the download's host.
    private var holders: [DownloadID: String] = [:]
    private var activeByHost: [String: Int] = [:]
    /// Hosts at their limit: the queue skips their rows.
    private(set) var saturatedHosts: Set<String> = []
    /// State directories whose journal may hold queued rows.
    private(set) var queuedDirectories: Set<String> = []
    /// Directories whose queue had rows only for saturated hosts: looked at again when one frees.
    private var directoriesWaitingForHosts: Set<String> = []
    /// Directories whose journal holds downloads waiting to retry, with the earliest time one may run
    /// (seconds since 1970).
    private var retryWakes: [String: Double] = [:]

    init(slots: Int, perHostLimit: Int?) {
        self.slots = max(1, slots)
        self.perHostLimit = perHostLimit.map { max(1, $0) }
    }

    /// How many slots are held.
    var active: Int { holders.count }

    /// Whether another download may start now.
    var hasFreeSlot: Bool { holders.count < slots }

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
    }

    // MARK: slots

    /// `id`, from `host`, starts transferring: it holds a slot (once, however often it starts a
    /// request) until ``stopTransferring(_:)``.
    mutating func startTransferring(_ id: DownloadID, host: String) {
        guard holders[id] == nil else { return }
        holders[id] = host
        let count = activeByHost[host, default: 0] + 1
        activeByHost[host] = count
        if let perHostLimit, count >= perHostLimit {
            saturatedHosts.insert(host)
        }
    }

    /// Whether `id` holds a slot.
    func holdsSlot(_ id: DownloadID) -> Bool { holders[id] != nil }

    /// `id` paused or ended: its slot is free, and the queues waiting for its host are read again.
    mutating func stopTransferring(_ id: DownloadID) {
        guard let host = holders.removeValue(forKey: id) else { return }
        let remaining = (activeByHost[host] ?? 1) - 1
        activeByHost[host] = remaining > 0 ? remaining : nil
        if saturatedHosts.remove(host) != nil {
            queuedDirectories.formUnion(directoriesWaitingForHosts)
            directoriesWaitingForHosts.removeAll()
        }
    }

    // MARK: retries

    /// A download in `directory` may retry at `time`: its queue is read again then.
    mutating func wakeForRetry(in directory: String, at time: Double) {
        retryWakes[directory] = min(retryWakes[directory] ?? time, time)
    }

    /// The earliest time a queue is to be read again for a retry.
    var nextRetryWake: Double? { retryWakes.values.min() }

    /// It is `now`: the queues whose retries are due are read again.
    mutating func retriesDue(at now: Double) {
        for (directory, time) in retryWakes where time <= now + 0.001 {
            retryWakes[directory] = nil
            queuedDirectories.insert(directory)
        }
    }
}
