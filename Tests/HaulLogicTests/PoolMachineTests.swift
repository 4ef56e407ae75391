import Foundation
import Logging
import Testing

@testable import HaulIO
@testable import HaulScheduler
@testable import HaulTestSupport
@testable import HaulTransfer
@testable import HaulValues

/// Issue 76, item 2: the scheduler's decisions about who runs are one pure value, driven here by
/// hand with plain objects in place of transfers and plain numbers in place of clocks.
@Suite("The pool machine")
struct PoolMachineTests {
    final class Member {}
    typealias Pool = PoolMachine<Member>

    static func id(_ name: String) -> HaulValues.DownloadID { HaulValues.DownloadID(rawValue: name) }

    static func pool(
        slots: Int = 4,
        perHost: Int? = nil,
        finishing: Int = 8,
        streams: Int? = nil,
        kept: String? = nil,
        firstRetryDelay: Double = 1
    ) -> Pool {
        let settings = SchedulerSettings(
            slots: slots,
            perHostLimit: perHost,
            connectionLimit: 100,
            finishingLimit: finishing,
            streamsPerConnection: streams,
            checkpointInterval: .seconds(1),
            stallTimeout: .seconds(30),
            keptDirectory: kept,
            logger: Logger(label: "test")
        )
        return Pool(settings: settings, firstRetryDelay: firstRetryDelay)
    }

    @discardableResult
    static func admit(
        _ pool: inout Pool,
        _ name: String,
        host: String = "h:80",
        in directory: String = "/s",
        multiplexes: Bool = false
    ) -> (Member, Pool.Admitted) {
        let member = Member()
        let admitted = pool.admit(id(name), member, host: host, directory: directory, multiplexes: multiplexes, now: 0)
        return (member, admitted)
    }

    @Test("admitting: a slot each, the timers with the first only, the member found by its id")
    func admitting() {
        var pool = Self.pool(slots: 2)
        let (a, first) = Self.admit(&pool, "a")
        let (_, second) = Self.admit(&pool, "b")
        #expect(first == .init(startsTimers: true, reportsAnswer: false))
        #expect(second == .init(startsTimers: false, reportsAnswer: false))
        #expect(pool.count == 2 && !pool.admission.hasFreeSlot)
        #expect(pool.member(Self.id("a")) === a && pool.isCurrent(a, as: Self.id("a")))
        #expect(!pool.isCurrent(Member(), as: Self.id("a")) && pool.member(Self.id("c")) == nil)
        #expect(pool.brokenRules().isEmpty)
    }

    @Test("an HTTPS download to a host whose grant follows reports its first answer; others do not")
    func reportsAnswer() {
        var pool = Self.pool(streams: 100)
        #expect(Self.admit(&pool, "a", host: "h:443", multiplexes: true).1.reportsAnswer)
        #expect(!Self.admit(&pool, "b", host: "p:80", multiplexes: false).1.reportsAnswer)
        var plain = Self.pool(streams: nil)
        #expect(!Self.admit(&plain, "a", host: "h:443", multiplexes: true).1.reportsAnswer)
        #expect(pool.brokenRules().isEmpty && plain.brokenRules().isEmpty)
    }

    @Test("leaving frees the slot and names the journal no one uses, unless queued, kept or shutting down")
    func leaving() {
        var pool = Self.pool(slots: 3, kept: "/kept")
        let (a, _) = Self.admit(&pool, "a", in: "/one")
        Self.admit(&pool, "b", in: "/one")
        Self.admit(&pool, "k", in: "/kept")
        #expect(!pool.admission.hasFreeSlot)
        var leaving = pool.leave(Self.id("a"))
        #expect(leaving.left === a && leaving.idleJournal == nil, "b still writes into /one")
        #expect(pool.admission.hasFreeSlot && pool.takeAdmissionDue())
        pool.queueChanged(in: "/one")
        leaving = pool.leave(Self.id("b"))
        #expect(leaving.left != nil && leaving.idleJournal == nil, "/one has rows queued")
        pool.queueDrained(in: "/one")
        #expect(pool.mayCloseJournal("/one") && !pool.mayCloseJournal("/kept"))
        #expect(pool.leave(Self.id("k")).idleJournal == nil, "the configured state directory stays open")
        leaving = pool.leave(Self.id("nobody"))
        #expect(leaving.left == nil && leaving.idleJournal == nil)

        Self.admit(&pool, "c", in: "/two")
        pool.beginShutdown()
        #expect(pool.leave(Self.id("c")).idleJournal == nil, "a shutdown closes every journal itself")
        #expect(pool.brokenRules().isEmpty)
    }

    @Test("a finishing download gives its slot to the next while it waits on the disk, within the finishing limit")
    func finishing() {
        var pool = Self.pool(slots: 1, finishing: 2)
        Self.admit(&pool, "a")
        #expect(!pool.admission.hasFreeSlot)
        _ = pool.takeAdmissionDue()
        pool.startFinishing(Self.id("a"))
        #expect(pool.takeAdmissionDue() && pool.admission.hasFreeSlot)
        Self.admit(&pool, "b")
        pool.startFinishing(Self.id("b"))
        #expect(!pool.admission.hasFreeSlot, "two may wait on the disk at once")
        #expect(pool.count == 2 && pool.brokenRules().isEmpty)
        _ = pool.leave(Self.id("a"))
        #expect(pool.admission.hasFreeSlot && pool.brokenRules().isEmpty)
    }

    @Test("what a download carries to its next attempt is taken once; one that ended or was forgotten carries nothing")
    func carried() {
        var pool = Self.pool()
        Self.admit(&pool, "a")
        Self.admit(&pool, "b")
        Self.admit(&pool, "c")
        let counts = (bytes: Int64(500), ledger: TimingLedger())
        _ = pool.leave(Self.id("a"), carrying: BetweenAttempts(restarts: 2, counts: counts))
        _ = pool.leave(Self.id("b"), carrying: BetweenAttempts(restarts: 1))
        _ = pool.leave(Self.id("c"))  // ended
        let a = pool.takeCarried(Self.id("a"))
        #expect(a.restarts == 2 && a.counts?.bytes == 500)
        #expect(pool.takeCarried(Self.id("a")).isEmpty, "an attempt carries it once")
        #expect(pool.takeCarried(Self.id("c")).isEmpty)
        pool.forget(Self.id("b"))  // cancelled while out of its slot
        #expect(pool.takeCarried(Self.id("b")).isEmpty)
        Self.admit(&pool, "b")
        _ = pool.leave(Self.id("b"), carrying: BetweenAttempts(restarts: 1))
        Self.admit(&pool, "b")
        _ = pool.leave(Self.id("b"))  // its next attempt ended: nothing is kept of it
        #expect(pool.takeCarried(Self.id("b")).isEmpty && pool.brokenRules().isEmpty)
    }

    @Test("the queue is read at the turn's end once per change, never while shutting down")
    func admissionDue() {
        var pool = Self.pool()
        #expect(pool.takeAdmissionDue() == false)
        pool.queueChanged(in: "/s")
        #expect(pool.admission.queuedDirectories == ["/s"])
        #expect(pool.takeAdmissionDue() && pool.takeAdmissionDue() == false)
        pool.admitAtTurnEnd()
        pool.beginShutdown()
        #expect(pool.takeAdmissionDue() == false)
    }

    @Test("connections: wanted ones are granted to members still admitted; waiters ask again when one leaves")
    func connections() {
        var pool = Self.pool(slots: 3, perHost: 3)
        let (a, _) = Self.admit(&pool, "a")
        let (b, _) = Self.admit(&pool, "b")
        Self.admit(&pool, "c")
        pool.wantConnections(Self.id("a"))
        pool.wantConnections(Self.id("c"))
        _ = pool.leave(Self.id("c"))
        #expect(pool.wantsConnections)
        let wanted = pool.takeConnectionsWanted()
        #expect(wanted.count == 1 && wanted[0] === a && !pool.wantsConnections)
        // The per-host limit counts extra connections: a has 3 now, the host is full.
        #expect(pool.mayOpenConnection(for: Self.id("a"), live: 2))
        pool.setConnections(Self.id("a"), 2)
        #expect(!pool.mayOpenConnection(for: Self.id("a"), live: 2))
        pool.waitForConnection(Self.id("a"))
        pool.waitForConnection(Self.id("b"))
        let leaving = pool.leave(Self.id("a"))
        #expect(leaving.waiting.count == 1 && leaving.waiting[0] === b)
        #expect(pool.mayOpenConnection(for: Self.id("b"), live: 1))
        #expect(pool.takeConnectionWaiters().map(ObjectIdentifier.init) == [ObjectIdentifier(b)])
        #expect(pool.takeConnectionWaiters().isEmpty && pool.brokenRules().isEmpty)
    }

    @Test("retries: the timer is armed for the earliest, and fires at most once per gap")
    func retries() {
        var pool = Self.pool(firstRetryDelay: 0.2)  // a gap of 50 ms
        #expect(pool.retryWakeGap == 0.05)
        #expect(pool.wakeForRetry(in: "/s", at: 105, now: 100) == 5)
        #expect(pool.wakeForRetry(in: "/s", at: 102, now: 100) == 2)
        #expect(pool.wakeForRetry(in: "/t", at: 102.01, now: 100) == 2)
        _ = pool.takeAdmissionDue()
        // Fired at 102: /s's 102 is due; /t's, 10 ms later, waits for the gap, not for its own time.
        let next = pool.retryTimerFired(now: 102)
        #expect(pool.admission.queuedDirectories == ["/s"] && pool.takeAdmissionDue())
        #expect(next.map { abs($0 - 0.05) < 1e-9 } == true, "\(String(describing: next))")
        #expect(pool.retryTimerFired(now: 102.05).map { abs($0 - 2.95) < 1e-9 } == true)
        #expect(pool.admission.queuedDirectories == ["/s", "/t"])
        #expect(pool.retryTimerFired(now: 105) == nil, "nothing left to wake")
        let late = pool.wakeForRetry(in: "/s", at: 90, now: 105.01)
        #expect(late.map { abs($0 - 0.04) < 1e-9 } == true, "past, but within the gap")
        #expect(Self.pool(firstRetryDelay: 10).retryWakeGap == 0.1)
    }

    @Test("idle: only when nothing is admitted, followed, queued or on the disk, and once per wait")
    func idle() {
        var pool = Self.pool()
        #expect(pool.takeIdle(diskPending: 0, followsRows: false) == false, "nobody waits")
        pool.waitForIdle()
        Self.admit(&pool, "a")
        #expect(pool.takeIdle(diskPending: 0, followsRows: false) == false)
        _ = pool.leave(Self.id("a"))
        pool.queueChanged(in: "/s")
        #expect(pool.takeIdle(diskPending: 0, followsRows: false) == false)
        pool.queueDrained(in: "/s")
        #expect(pool.takeIdle(diskPending: 1, followsRows: false) == false)
        #expect(pool.takeIdle(diskPending: 0, followsRows: true) == false, "rows followed")
        #expect(
            pool.takeIdle(diskPending: 0, followsRows: false)
                && pool.takeIdle(diskPending: 0, followsRows: false) == false
        )
    }

    @Test("a shutdown ends once the disk reported, and hands back what was admitted")
    func shutdown() {
        var pool = Self.pool()
        let (a, _) = Self.admit(&pool, "a")
        #expect(pool.diskReported(diskPending: 0) == false, "no shutdown waits")
        pool.beginShutdown()
        #expect(pool.isShuttingDown)
        #expect(pool.shutdownEnds(diskPending: 2) == false)
        #expect(pool.diskReported(diskPending: 1) == false)
        #expect(pool.diskReported(diskPending: 0) && pool.diskReported(diskPending: 0) == false)
        let ended = pool.end()
        #expect(ended.count == 1 && ended[0] === a && pool.count == 0)
        #expect(pool.admission.queuedDirectories.isEmpty && pool.brokenRules().isEmpty)
        var quiet = Self.pool()
        quiet.beginShutdown()
        let ends = quiet.shutdownEnds(diskPending: 0)
        #expect(ends)
    }
}

/// Random inputs, as AsyncHTTPClient's `HTTPConnectionPool+StateFuzzTests` drives its pool: the
/// scheduler's part played as it plays it (a download admitted only to a free slot and a host not at
/// its limit), the machine's books checked after every step against a model kept beside it.
@Suite("The pool machine, random inputs")
struct PoolMachineFuzzTests {
    typealias Pool = PoolMachineTests.Pool

    @Test("10,000 random steps keep the books' rules and the model's counts", arguments: [1, 2, 3, 4, 5] as [UInt64])
    func randomSteps(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var pool = PoolMachineTests.pool(slots: 6, perHost: 3, finishing: 3, streams: 4, kept: "/kept")
        let hosts = ["a:443", "b:443", "c:80"]
        let directories = ["/one", "/two", "/kept"]
        var model: [HaulValues.DownloadID: (member: PoolMachineTests.Member, directory: String)] = [:]
        var finishing: Set<HaulValues.DownloadID> = []
        var open: Set<Int32> = []  // sockets curl holds: a number is reused only once closed
        var nextID = 0
        var now: Double = 1000
        for step in 0..<10_000 {
            now += Double.random(in: 0...0.05, using: &random)
            let any = model.keys.randomElement(using: &random)
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<25:  // admitted where a slot is free and the host not at its limit
                let host = hosts.randomElement(using: &random)!
                guard pool.admission.hasFreeSlot, !pool.admission.saturatedHosts.contains(host) else { continue }
                let id = HaulValues.DownloadID(rawValue: "d\(nextID)")
                nextID += 1
                let member = PoolMachineTests.Member()
                let directory = directories.randomElement(using: &random)!
                _ = pool.admit(id, member, host: host, directory: directory, multiplexes: host.hasSuffix("443"), now: 0)
                model[id] = (member, directory)
            case 25..<40:  // one leaves
                guard let id = any else { continue }
                let leaving = pool.leave(id)
                let (member, directory) = model.removeValue(forKey: id)!
                finishing.remove(id)
                #expect(leaving.left === member)
                if let idle = leaving.idleJournal {
                    #expect(idle == directory && idle != "/kept" && !model.values.contains { $0.directory == idle })
                }
            case 40..<48:  // one's bytes are all received
                guard let id = any, !finishing.contains(id), pool.admission.occupants[id] != nil else { continue }
                pool.startFinishing(id)
                finishing.insert(id)
            case 48..<60:  // connections wanted, granted as far as the limits allow
                guard let id = any else { continue }
                pool.wantConnections(id)
                for member in pool.takeConnectionsWanted() {
                    #expect(model.values.contains { $0.member === member }, "a member granted connections is admitted")
                }
                let live = Int.random(in: 1...4, using: &random)
                if pool.admission.occupants[id] != nil, pool.mayOpenConnection(for: id, live: live - 1) {
                    pool.setConnections(id, live)
                } else {
                    pool.waitForConnection(id)
                }
            case 60..<66:
                for member in pool.takeConnectionWaiters() {
                    #expect(model.values.contains { $0.member === member })
                }
            case 66..<74:  // a queue changes or drains
                let directory = directories.randomElement(using: &random)!
                if Bool.random(using: &random) {
                    pool.queueChanged(in: directory)
                } else {
                    pool.queueDrained(in: directory, blockedByHosts: Bool.random(using: &random))
                }
            case 74..<82:  // a retry is set up, or the timer fires
                if Bool.random(using: &random) {
                    let delay = pool.wakeForRetry(
                        in: directories.randomElement(using: &random)!,
                        at: now + Double.random(in: -1...3, using: &random),
                        now: now
                    )
                    #expect(delay.map { $0 >= 0 } ?? false)
                } else if let next = pool.retryTimerFired(now: now) {
                    #expect(next >= 0 && pool.admission.nextRetryWake.map { $0 > now + 0.001 } == true)
                }
            case 82..<88:  // HTTP/2: a socket opened, an answer
                guard let id = any else { continue }
                let socket = Int32(10 + Int.random(in: 0..<40, using: &random))
                if open.insert(socket).inserted {
                    pool.socketOpened(socket, by: id, order: UInt64(step))
                }
                pool.answered(id, multiplexes: Bool.random(using: &random), socketsOpened: UInt64(step))
            case 88..<94:
                guard let socket = open.randomElement(using: &random) else { continue }
                open.remove(socket)
                pool.socketClosing(socket)
            default:
                pool.expireWaits(now: UInt64(now * 1e9))
            }
            #expect(pool.count == model.count)
            let broken = pool.brokenRules()
            #expect(broken.isEmpty, "step \(step): \(broken)")
            if !broken.isEmpty || pool.count != model.count { return }
        }
        // Everything leaves: every slot is free again, no journal is in use.
        for id in model.keys { _ = pool.leave(id) }
        #expect(pool.count == 0 && pool.brokenRules().isEmpty)
        // As many as the slots allow, within the disk's three (the finishing limit bounds admission).
        #expect(pool.admission.freeSlots == 3, "\(pool.admission)")
        for directory in ["/one", "/two"] where !pool.admission.queuedDirectories.contains(directory) {
            #expect(pool.mayCloseJournal(directory))
        }
    }
}
