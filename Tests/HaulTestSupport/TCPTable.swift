import Foundation
import Glibc

/// The kernel's table of TCP sockets (`/proc/net/tcp`, `/proc/net/tcp6`): how many connections to a
/// local port are established at this instant, as the client's side of each is. Read while a test
/// runs, it counts what the process opened to a server at each look, without the lag of a server's
/// log (which ends a request the client cut only when it notices, often after the client's next
/// request began). A look can miss a peak between two looks; it never counts one that was not there.
enum TCPTable {
    /// The established connections whose remote end is 127.0.0.1:`port` (or ::1:`port`): clients'.
    ///
    /// Counted once each by their two addresses: the kernel hands the table out a page per read,
    /// and a socket that opens or closes between two reads moves the rest, so a socket can come
    /// twice in one look (seen beside stress-ng: one socket, one inode, on two lines).
    static func establishedClients(toPort port: Int) -> Int {
        let wanted = String(format: ":%04X", port)
        var seen: Set<String> = []
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = readWhole(table) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                // sl local_address rem_address st ...
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count > 3, fields[3] == "01", fields[2].hasSuffix(wanted) else { continue }
                seen.insert("\(fields[1]) \(fields[2])")
            }
        }
        return seen.count
    }

    /// The whole of a `/proc` file, read until its end: its size says 0, and a read that trusts it
    /// (as `String(contentsOfFile:)` may) gets the first page only, which a few hundred sockets
    /// in TIME_WAIT from earlier tests fill.
    private static func readWhole(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes.append(contentsOf: buffer[..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Looks at the table every `interval` on a thread of its own until ``stop()``.
    final class Sampler: @unchecked Sendable {
        // @unchecked Sendable: `most`, `looks` and `running` are touched under `lock`.
        private let lock = NSLock()
        private var most = 0
        private var looks = 0
        private var running = true
        private let done = DispatchSemaphore(value: 0)

        init(port: Int, interval: TimeInterval = 0.002) {
            Thread { [self] in
                while lock.withLock({ running }) {
                    let now = TCPTable.establishedClients(toPort: port)
                    lock.withLock {
                        most = max(most, now)
                        looks += 1
                    }
                    Thread.sleep(forTimeInterval: interval)
                }
                done.signal()
            }.start()
        }

        /// Stops looking: the most connections seen at once, and how many looks were made.
        func stop() -> (most: Int, looks: Int) {
            lock.withLock { running = false }
            done.wait()
            return lock.withLock { (most, looks) }
        }
    }
}
