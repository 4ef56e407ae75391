import FoundationEssentials
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
    // One flat object of numbers and strings, keys sorted (FoundationEssentials has no JSONSerialization,
    // and linking the whole of Foundation would add its memory to Haul's peak RSS).
    let fields = object.keys.sorted().map { key -> String in
        switch object[key]! {
        case let number as Int: "\"\(key)\":\(number)"
        case let number as Double: "\"\(key)\":\(number)"
        case let text: "\"\(key)\":\"\(String(describing: text))\""
        }
    }
    print("{\(fields.joined(separator: ","))}")
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
    let message = "usage: see the comment at the top of main.swift\n"
    _ = write(2, message, message.utf8.count)
    exit(2)
}
