import Dispatch

/// The instants behind a download's timings (the facade's public `DownloadTimings`) (uptime nanoseconds; 0: not yet), written on the loop
/// thread and read anywhere under the download's lock.
package struct TimingLedger {
    package let createdAt = DispatchTime.now().uptimeNanoseconds
    package private(set) var firstRequestAt: UInt64 = 0
    package private(set) var firstByteAt: UInt64 = 0
    package private(set) var endedAt: UInt64 = 0
    package private(set) var attempts = 0
    package private(set) var connectionsOpened = 0
    package private(set) var connectionsReused = 0
    /// The first answered request's phases in microseconds (0: none yet), and the last status.
    package private(set) var phases: (nameLookup: UInt32, connect: UInt32, tls: UInt32, firstByte: UInt32) = (
        0, 0, 0, 0
    )
    package private(set) var status: Int16 = 0
    /// The statuses before `status` (empty, and no allocation, for a download answered once).
    package private(set) var earlierStatuses: [Int16] = []

    package init() {}

    /// A request (not a redirect's) goes out.
    package mutating func requestStarted() {
        attempts += 1
        if firstRequestAt == 0 { firstRequestAt = DispatchTime.now().uptimeNanoseconds }
    }

    /// A body was accepted: its first byte is here.
    package mutating func bodyStarted() {
        if firstByteAt == 0 { firstByteAt = DispatchTime.now().uptimeNanoseconds }
    }

    /// A request's handle leaves curl: `opened` connections curl made for it; none, for a request
    /// that was answered, means it went over one already open.
    /// `status`: its answer's (0 for none); `phases`: curl's times of it, in microseconds
    /// (``EasyHandle/phaseTimes``), kept for the first request answered.
    package mutating func requestStopped(
        opened: Int,
        status: Int,
        phases: (nameLookup: Int64, connect: Int64, tls: Int64, firstByte: Int64)
    ) {
        if opened > 0 {
            connectionsOpened += opened
        } else if status > 0 {
            connectionsReused += 1
        }
        guard status > 0 else { return }
        if self.status != 0 { earlierStatuses.append(self.status) }
        self.status = Int16(clamping: status)
        if self.phases.firstByte == 0, phases.firstByte > 0 {
            self.phases = (
                UInt32(clamping: phases.nameLookup), UInt32(clamping: phases.connect), UInt32(clamping: phases.tls),
                UInt32(clamping: phases.firstByte)
            )
        }
    }

    /// The download ended (its final event is being published).
    package mutating func ended() {
        if endedAt == 0 { endedAt = DispatchTime.now().uptimeNanoseconds }
    }
}
