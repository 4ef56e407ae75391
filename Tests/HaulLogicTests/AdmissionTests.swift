import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulScheduler
@testable import HaulTestSupport
@testable import HaulValues

@Suite("Admission")
struct AdmissionTests {
    let a = HaulValues.DownloadID(rawValue: "a")
    let b = HaulValues.DownloadID(rawValue: "b")
    let c = HaulValues.DownloadID(rawValue: "c")

    @Test func slotsBoundTheTransfersAndAreHeldOncePerDownload() {
        var admission = Admission(slots: 2, perHostLimit: nil)
        #expect(admission.hasFreeSlot && admission.freeSlots == 2)
        admission.startTransferring(a, host: "h:80")
        admission.startTransferring(a, host: "h:80")  // a next request of the same download
        #expect(admission.active == 1 && admission.freeSlots == 1)
        admission.startTransferring(b, host: "h:80")
        #expect(admission.active == 2)
        #expect(!admission.hasFreeSlot && admission.freeSlots == 0)
        #expect(admission.hasSlot(a) && admission.hasSlot(b) && !admission.hasSlot(c))
        admission.stopTransferring(a)
        admission.stopTransferring(a)  // a second stop frees nothing more
        #expect(admission.active == 1)
        #expect(admission.hasFreeSlot)
        // A configured 0 still runs one download.
        #expect(Admission(slots: 0, perHostLimit: 0).slots == 1)
        #expect(Admission(slots: 0, perHostLimit: 0).perHostLimit == 1)
    }

    @Test("a download waiting on the disk gives its slot and host share to the next; as many wait at most")
    func finishingDownloadsFreeTheirSlots() {
        var admission = Admission(slots: 2, perHostLimit: 1, finishingLimit: 2)
        admission.startTransferring(a, host: "h:80")
        #expect(admission.saturatedHosts == ["h:80"])
        admission.startFinishing(a)
        #expect(admission.active == 0 && admission.finishingCount == 1)
        #expect(!admission.hasSlot(a) && admission.saturatedHosts.isEmpty && admission.hasFreeSlot)
        // Two slots are free, but only one more may wait on the disk after them.
        #expect(admission.freeSlots == 1)
        admission.startTransferring(b, host: "h:80")
        admission.startFinishing(b)
        // Two wait on the disk: nobody else starts, though every slot is free...
        #expect(admission.active == 0 && !admission.hasFreeSlot)
        // ...until one is in place.
        admission.stopTransferring(a)
        #expect(admission.finishingCount == 1 && admission.hasFreeSlot)
        // Finishing one that holds no slot changes nothing.
        admission.startFinishing(c)
        #expect(admission.finishingCount == 1)
        #expect(Admission(slots: 3, perHostLimit: nil).finishingLimit == 3)
        // A manager lets twice its slots wait on the disk, within half its partial files' descriptors.
        #expect(MemoryBudget.finishingLimit(slots: 100, openPartialFiles: 1_000) == 200)
        #expect(MemoryBudget.finishingLimit(slots: 100, openPartialFiles: 256) == 128)
        #expect(MemoryBudget.finishingLimit(slots: 0, openPartialFiles: 1) == 1)
    }

    @Test func aHostAtItsLimitIsSkippedUntilOneOfItsSlotsFrees() {
        var admission = Admission(slots: 10, perHostLimit: 2)
        admission.startTransferring(a, host: "one:80")
        #expect(admission.saturatedHosts.isEmpty)
        admission.startTransferring(b, host: "one:80")
        #expect(admission.saturatedHosts == ["one:80"])
        admission.startTransferring(c, host: "two:443")
        #expect(admission.saturatedHosts == ["one:80"])
        // A directory whose queue held only rows of the saturated host waits for it, off the list.
        admission.queueChanged(in: "/q")
        admission.queueDrained(in: "/q", blockedByHosts: true)
        #expect(admission.queuedDirectories.isEmpty)
        #expect(!admission.queuesAreEmpty)
        // Another host's download ending does not bring it back...
        admission.stopTransferring(c)
        #expect(admission.queuedDirectories.isEmpty)
        // ...one of the saturated host's does.
        admission.stopTransferring(a)
        #expect(admission.saturatedHosts.isEmpty)
        #expect(admission.queuedDirectories == ["/q"])
        admission.queueDrained(in: "/q")
        #expect(admission.queuesAreEmpty)
    }

    @Test func extraConnectionsCountAgainstTheHostAndTheBudget() {
        var admission = Admission(slots: 10, perHostLimit: 3, connectionLimit: 5)
        admission.startTransferring(a, host: "one:80")
        // Its first connection is its slot's: always allowed.
        #expect(admission.mayOpenConnection(for: a, live: 0))
        #expect(admission.mayOpenConnection(for: a, live: 1))
        admission.setConnections(a, 3)
        #expect(admission.saturatedHosts == ["one:80"])
        #expect(!admission.mayOpenConnection(for: a, live: 3))
        // Fewer connections free the host: a queue that waited for it is read again.
        admission.queueChanged(in: "/q")
        admission.queueDrained(in: "/q", blockedByHosts: true)
        admission.setConnections(a, 2)
        #expect(admission.saturatedHosts.isEmpty)
        #expect(admission.queuedDirectories == ["/q"])
        // The budget: 2 slots and 3 extra connections fill 5.
        admission.startTransferring(b, host: "two:80")
        admission.setConnections(b, 3)
        #expect(!admission.mayOpenConnection(for: b, live: 3))
        #expect(!admission.hasFreeSlot && admission.freeSlots == 0)
        admission.stopTransferring(b)  // its extra connections go with it
        #expect(admission.hasFreeSlot)
        #expect(admission.mayOpenConnection(for: a, live: 2))
        #expect(!admission.mayOpenConnection(for: c, live: 0))  // holds no slot
    }

    @Test func retriesWakeTheirQueueAtEachOfTheirTimes() {
        var admission = Admission(slots: 1, perHostLimit: nil)
        #expect(admission.nextRetryWake == nil)
        admission.wakeForRetry(in: "/x", at: 200)
        admission.wakeForRetry(in: "/x", at: 150)  // the earliest first
        admission.wakeForRetry(in: "/x", at: 300)
        admission.wakeForRetry(in: "/x", at: 200)  // kept once
        admission.wakeForRetry(in: "/y", at: 250)
        #expect(admission.nextRetryWake == 150)
        #expect(!admission.queuesAreEmpty)
        admission.retriesDue(at: 149)
        #expect(admission.queuedDirectories.isEmpty)
        admission.retriesDue(at: 150)
        #expect(admission.queuedDirectories == ["/x"])
        // The later retries of /x are still known: the one woken first does not stand for them.
        #expect(admission.nextRetryWake == 200)
        let wokenEarly = admission.takeWokenForRetry("/x")
        #expect(!wokenEarly)
        admission.queueDrained(in: "/x")
        admission.retriesDue(at: 200)
        #expect(admission.queuedDirectories == ["/x"] && admission.nextRetryWake == 250)
        admission.retriesDue(at: 1000)
        #expect(admission.queuedDirectories == ["/x", "/y"])
        #expect(admission.nextRetryWake == nil)
        // Every time known came: the next read asks the journal for rows set up elsewhere, once.
        let (first, second) = (admission.takeWokenForRetry("/x"), admission.takeWokenForRetry("/x"))
        #expect(first && !second)
        admission.forgetQueues()
        #expect(admission.queuesAreEmpty)
    }

    @Test func higherPrioritiesFirstThenFirstIn() {
        let early = Journal.QueuePlace(priority: 0, sequence: 1)
        let late = Journal.QueuePlace(priority: 0, sequence: 2)
        let urgent = Journal.QueuePlace(priority: 5, sequence: 9)
        #expect(early.isAhead(of: late))
        #expect(!late.isAhead(of: early))
        #expect(urgent.isAhead(of: early))
        #expect(!early.isAhead(of: urgent))
        #expect(!early.isAhead(of: early))
    }

    @Test func theSyncLedgerDropsReportsOfATruncatedFile() {
        var ledger = SyncLedger()
        let answer9 = ledger.reported(a)  // nothing was asked
        #expect(!answer9)
        ledger.requested(a)
        ledger.requested(a)
        let answer7 = ledger.reported(a)
        #expect(answer7)
        ledger.truncated(a)
        let answer10 = ledger.reported(a)  // asked before the truncation
        #expect(!answer10)
        ledger.requested(a)
        let answer8 = ledger.reported(a)  // asked after it
        #expect(answer8)
    }
}
