import Foundation
import Glibc

// What every benchmark process reports: one JSON line with its wall time, CPU time and peak RSS.

public enum Usage {
    public static func now() -> (user: Double, system: Double, peakKB: Int) {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return (seconds(usage.ru_utime), seconds(usage.ru_stime), usage.ru_maxrss)
    }

    public static func currentRSSKB() -> Int {
        let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        return 0
    }
}

/// Prints `fields` with the time since `started`, the process's CPU seconds and its peak RSS.
public func report(_ fields: [String: Any], started: ContinuousClock.Instant) {
    let elapsed = ContinuousClock.now - started
    let usage = Usage.now()
    var object = fields
    object["wallSeconds"] = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    object["cpuSeconds"] = usage.user + usage.system
    object["peakRSSKB"] = usage.peakKB
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}

/// Runs `work(i)` for i in 0..<count with at most `width` at once.
public func bounded(_ count: Int, width: Int, _ work: @escaping @Sendable (Int) async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        var next = 0
        while next < min(width, count) {
            let index = next
            group.addTask { try await work(index) }
            next += 1
        }
        while try await group.next() != nil {
            if next < count {
                let index = next
                group.addTask { try await work(index) }
                next += 1
            }
        }
    }
}

public func usageError() -> Never {
    FileHandle.standardError.write(Data("usage: see the comment at the top of main.swift\n".utf8))
    exit(2)
}
