import HaulValues

/// The pool machine (as AsyncHTTPClient's `HTTPConnectionPool.StateMachine`): everything the
/// ``Scheduler`` decides about who runs, as one value with no I/O. Who is admitted (with their state
/// directories) and what those out of their slot carry to their next attempt, ``Admission``'s slots,
/// hosts, grants, queues and retry times, the connections segmented downloads want or wait for,
/// whether the queue is to be read at the turn's end, the retry timer's pace, whether tasks wait for
/// it to be idle, and the manager's shutdown. The scheduler tells it what happened and does what it
/// answers: read a queue, arm a timer, close a journal, let the idle waiters go. Generic over what it admits, so that its tests
/// drive it with plain objects (``PoolMachineTests``).
struct PoolMachine<Member: AnyObject> {
    let settings: SchedulerSettings
    /// Slots, hosts, connections, grants, queued directories and retry times.
    private(set) var admission: Admission
    /// Admitted downloads (connecting, receiving, or finishing), with their state directories.
    private var members: [DownloadID: (member: Member, directory: String)] = [:]
    /// How many members write into each state directory (a journal in use is never closed).
    private var membersByDirectory: [String: Int] = [:]
    /// What downloads out of their slot (paused, waiting to retry) carry to their next attempt in
    /// this process, from the member that left to the one admitted next (``BetweenAttempts``).
    private var carried: [DownloadID: BetweenAttempts] = [:]
    /// Segmented members that asked for connections this turn, granted at its end.
    private var connectionsWanted: Set<DownloadID> = []
    /// Segmented members that wanted a connection the limits did not allow yet.
    private var connectionWaiters: Set<DownloadID> = []
    /// A slot may have freed or a queue changed this turn: the queue is read at its end.
    private var admissionDue = false
    /// A task waits for no download to be queued or running.
    private var idleWaitersPending = false
    private var timersStarted = false
    private(set) var isShuttingDown = false
    /// The shutdown waits for the disk lanes' last report.
    private var stopsWhenSynced = false
    /// When the retry timer last fired (seconds since 1970): it fires at most every
    /// `retryWakeGap`, so that thousands of jittered retries (a host down) wake the queue about ten
    /// times a second, each taking every retry due, not once per retry.
    private var retryTimerFiredAt: Double = 0
    /// A quarter of the first retry delay, at most 100 ms: a retry waits at most that much longer.
    let retryWakeGap: Double
    /// When the gauges last read the journals' counts (uptime nanoseconds).
    private var journalCountsReadAt: UInt64 = 0

    init(settings: SchedulerSettings, firstRetryDelay: Double) {
        self.settings = settings
        self.admission = Admission(
            slots: settings.slots,
            perHostLimit: settings.perHostLimit,
            connectionLimit: settings.connectionLimit,
            finishingLimit: settings.finishingLimit,
            streamsPerConnection: settings.streamsPerConnection
        )
        retryWakeGap = min(0.1, firstRetryDelay / 4)
    }

    // MARK: members

    /// How many are admitted.
    var count: Int { members.count }
    /// The admitted members.
    var admitted: [Member] { members.values.map(\.member) }
    /// The member admitted as `id`, if any.
    func member(_ id: DownloadID) -> Member? { members[id]?.member }
    /// Whether `member` is the one admitted as `id` now (not a later one of the same download).
    func isCurrent(_ member: Member, as id: DownloadID) -> Bool { members[id]?.member === member }

    /// What admitting a member asks of the scheduler.
    struct Admitted: Equatable {
        /// The first admission: the checkpoint and idle timers start.
        var startsTimers: Bool
        /// Its host's HTTP/2 grant follows its first answer (it reports it).
        var reportsAnswer: Bool
    }

    /// `member` was admitted as `id`, from `host`, writing into `directory`'s journal; `multiplexes`:
    /// its request may go over HTTP/2; `now`: uptime nanoseconds.
    mutating func admit(
        _ id: DownloadID,
        _ member: Member,
        host: String,
        directory: String,
        multiplexes: Bool,
        now: UInt64
    ) -> Admitted {
        if let earlier = members.updateValue((member, directory), forKey: id) {
            // The same download again (not something the scheduler does): counted once.
            _ = countOut(of: earlier.directory)
        }
        membersByDirectory[directory, default: 0] += 1
        admission.startTransferring(id, host: host, multiplexes: multiplexes, now: now)
        let startsTimers = !timersStarted
        timersStarted = true
        return Admitted(startsTimers: startsTimers, reportsAnswer: multiplexes && admission.grantsFollow(host))
    }

    /// What a member leaving asks of the scheduler.
    struct Leaving {
        /// The member left (it was admitted): its rate limits go.
        var left: Member?
        /// Members waiting for a connection, which may ask again.
        var waiting: [Member]
        /// A journal no member uses any more, with nothing queued: to close if idle.
        var idleJournal: String?
    }

    /// `id` paused or ended: it frees its slot (a finishing one leaves the finishing count), and its
    /// connections go to those waiting. `carrying`: what its next attempt here starts from (a
    /// download paused or to be retried); `nil` when it ended, and nothing is kept of it.
    mutating func leave(_ id: DownloadID, carrying: BetweenAttempts? = nil) -> Leaving {
        carried[id] = carrying.flatMap { $0.isEmpty ? nil : $0 }
        admission.stopTransferring(id)
        connectionWaiters.remove(id)
        let waiting = connectionWaiters.compactMap { members[$0]?.member }
        admissionDue = true
        guard let (member, directory) = members.removeValue(forKey: id) else {
            return Leaving(left: nil, waiting: waiting, idleJournal: nil)
        }
        let left = countOut(of: directory)
        let idle = left == 0 && !admission.queuedDirectories.contains(directory) && mayCloseJournal(directory)
        return Leaving(left: member, waiting: waiting, idleJournal: idle ? directory : nil)
    }

    /// One member fewer writes into `directory`: how many are left.
    private mutating func countOut(of directory: String) -> Int {
        let left = (membersByDirectory[directory] ?? 1) - 1
        membersByDirectory[directory] = left > 0 ? left : nil
        return max(0, left)
    }

    /// Whether `directory`'s journal may close when idle: no member writes into it, the manager is
    /// not shutting down (which closes every journal), and it is not the configured state directory.
    func mayCloseJournal(_ directory: String) -> Bool {
        membersByDirectory[directory] == nil && !isShuttingDown && directory != settings.keptDirectory
    }

    /// What `id`'s last attempt here carried to this one, taken (an attempt carries it once).
    mutating func takeCarried(_ id: DownloadID) -> BetweenAttempts {
        carried.removeValue(forKey: id) ?? BetweenAttempts()
    }

    /// `id` ended (completed, failed, cancelled, handed over, followed to its end): nothing an attempt
    /// carried is kept.
    mutating func forget(_ id: DownloadID) { carried[id] = nil }

    /// `id`'s bytes are all received: it waits on the disk, its slot free for the next.
    mutating func startFinishing(_ id: DownloadID) {
        admission.startFinishing(id)
        admissionDue = true
    }

    // MARK: queues

    /// Rows were queued in `directory`'s journal: read at the turn's end.
    mutating func queueChanged(in directory: String) {
        admission.queueChanged(in: directory)
        admissionDue = true
    }

    /// `directory`'s queue has nothing to admit now (``Admission/queueDrained(in:blockedByHosts:)``).
    mutating func queueDrained(in directory: String, blockedByHosts: Bool = false) {
        admission.queueDrained(in: directory, blockedByHosts: blockedByHosts)
    }

    /// Whether every known retry time of `directory` came since it was last read.
    mutating func takeWokenForRetry(_ directory: String) -> Bool { admission.takeWokenForRetry(directory) }

    /// The queue is to be read at this turn's end (a slot may have freed), once every callback of
    /// the turn has run. Admitted inside the callback that freed a slot, each new request left alone
    /// while the others were still being read, and curl sent it within the next socket's action: a
    /// local server went idle and was woken for almost every request. Admitted together, the
    /// turn's requests go out together at the start of the next turn.
    mutating func admitAtTurnEnd() { admissionDue = true }

    /// Whether the queue is to be read now, at the turn's end; the flag is taken.
    mutating func takeAdmissionDue() -> Bool {
        defer { admissionDue = false }
        return admissionDue && !isShuttingDown
    }

    // MARK: connections

    /// `id` wants more connections: granted at the turn's end.
    mutating func wantConnections(_ id: DownloadID) { connectionsWanted.insert(id) }

    /// The members that asked for connections this turn (still admitted).
    mutating func takeConnectionsWanted() -> [Member] {
        defer { connectionsWanted.removeAll() }
        return connectionsWanted.compactMap { members[$0]?.member }
    }

    /// Whether any member asked for connections this turn.
    var wantsConnections: Bool { !connectionsWanted.isEmpty }

    /// Whether `id`, with `live` connections, may open one more (``Admission/mayOpenConnection(for:live:)``).
    func mayOpenConnection(for id: DownloadID, live: Int) -> Bool { admission.mayOpenConnection(for: id, live: live) }

    /// `id` has `live` connections now.
    mutating func setConnections(_ id: DownloadID, _ live: Int) { admission.setConnections(id, live) }

    /// `id` still wants a connection the limits do not allow: it asks again when one closes.
    mutating func waitForConnection(_ id: DownloadID) { connectionWaiters.insert(id) }

    /// A member's connections changed: those waiting for one (still admitted) ask again.
    mutating func takeConnectionWaiters() -> [Member] {
        defer { connectionWaiters.removeAll() }
        return connectionWaiters.compactMap { members[$0]?.member }
    }

    /// Curl opened `socket` for `id`'s request (the grants count connections by it).
    mutating func socketOpened(_ socket: Int32, by id: DownloadID, order: UInt64) {
        admission.socketOpened(socket, by: id, order: order)
    }

    /// Curl closes `socket`: a granted connection may have gone.
    mutating func socketClosing(_ socket: Int32) {
        if admission.socketClosing(socket) { admissionDue = true }
    }

    /// `id`'s first answer said whether its host multiplexes.
    mutating func answered(_ id: DownloadID, multiplexes: Bool, socketsOpened: UInt64) {
        if admission.answered(id, multiplexes: multiplexes, socketsOpened: socketsOpened) { admissionDue = true }
    }

    /// `id` was sent to another host and left its stream here.
    mutating func leftHost(_ id: DownloadID) {
        if admission.leftHost(id) { admissionDue = true }
    }

    /// Hosts whose first answer is late let their downloads go (``ConnectionGrants/expireWaits(now:)``).
    mutating func expireWaits(now: UInt64) {
        if admission.expireWaits(now: now) { admissionDue = true }
    }

    // MARK: retries

    /// A download in `directory` may retry at `time`; `now` is the time (seconds since 1970).
    /// Returns when the retry timer is to fire, in seconds from now.
    mutating func wakeForRetry(in directory: String, at time: Double, now: Double) -> Double? {
        admission.wakeForRetry(in: directory, at: time)
        return retryTimerDelay(now: now)
    }

    /// The retry timer fired at `now`: the queues whose retries are due are read at the turn's end.
    /// Returns when it is to fire next, if a retry is still waiting.
    mutating func retryTimerFired(now: Double) -> Double? {
        retryTimerFiredAt = now
        admission.retriesDue(at: now)
        admissionDue = true
        return retryTimerDelay(now: now)
    }

    /// Seconds until the earliest retry, and at least `retryWakeGap` after the last firing.
    private func retryTimerDelay(now: Double) -> Double? {
        guard let earliest = admission.nextRetryWake else { return nil }
        return max(0, earliest - now, retryTimerFiredAt + retryWakeGap - now)
    }

    // MARK: gauges

    /// Whether the gauges read the journals' counts at `now` (uptime nanoseconds): at most once a
    /// second; taken when they are.
    mutating func takeJournalCountsDue(now: UInt64) -> Bool {
        guard now &- journalCountsReadAt >= 1_000_000_000 else { return false }
        journalCountsReadAt = now
        return true
    }

    // MARK: idle

    /// A task waits until no download is queued or running.
    mutating func waitForIdle() { idleWaitersPending = true }

    /// Whether the idle waiters are to be let go now (`diskPending`: disk jobs whose results are to
    /// come; `followsRows`: rows another manager runs are followed); the flag is taken when they are.
    mutating func takeIdle(diskPending: Int, followsRows: Bool) -> Bool {
        guard idleWaitersPending, members.isEmpty, !followsRows, admission.queuesAreEmpty, diskPending == 0
        else { return false }
        idleWaitersPending = false
        return true
    }

    // MARK: shutdown

    /// The manager shuts down: nothing is admitted any more.
    mutating func beginShutdown() { isShuttingDown = true }

    /// The shutdown waits for the disk lanes' report (`diskPending` jobs): whether it ends now.
    mutating func shutdownEnds(diskPending: Int) -> Bool {
        stopsWhenSynced = diskPending > 0
        return !stopsWhenSynced
    }

    /// The disk lanes reported; `diskPending` jobs are left: whether a shutdown waiting for them ends now.
    mutating func diskReported(diskPending: Int) -> Bool {
        guard stopsWhenSynced, diskPending == 0 else { return false }
        stopsWhenSynced = false
        return true
    }

    /// The shutdown ends: the members still admitted, handed back to be closed; nothing is queued
    /// any more.
    mutating func end() -> [Member] {
        let ended = admitted
        for id in members.keys { admission.stopTransferring(id) }
        members.removeAll()
        membersByDirectory.removeAll()
        connectionsWanted.removeAll()
        connectionWaiters.removeAll()
        admission.forgetQueues()
        return ended
    }

    // MARK: rules

    /// The rules its books keep, broken ones in words (its tests check them after every input):
    /// each admitted member occupies a slot or waits on the disk, not both, and nothing else does;
    /// the counts by directory are the members'; a member waiting for a connection is admitted;
    /// the grants keep theirs (``ConnectionGrants/brokenRules()``).
    func brokenRules() -> [String] {
        var broken: [String] = []
        let occupied = Set(admission.occupants.keys)
        if !occupied.isDisjoint(with: admission.finishing) {
            broken.append("occupying and finishing at once: \(occupied.intersection(admission.finishing))")
        }
        if occupied.union(admission.finishing) != Set(members.keys) {
            broken.append(
                "slots \(occupied), finishing \(admission.finishing), members \(members.keys.sorted { $0.rawValue < $1.rawValue })"
            )
        }
        var counted: [String: Int] = [:]
        for (_, directory) in members.values { counted[directory, default: 0] += 1 }
        if counted != membersByDirectory { broken.append("by directory \(membersByDirectory), members' \(counted)") }
        if !connectionWaiters.isSubset(of: members.keys) {
            broken.append("waiting for a connection: \(connectionWaiters)")
        }
        if admission.freeSlots > admission.slots - occupied.count { broken.append("free slots \(admission.freeSlots)") }
        return broken + (admission.grants?.brokenRules() ?? [])
    }
}
