import Glibc

/// How many file descriptors a manager's transfers may hold, from the process's open-files limit
/// (which the manager raises to its hard limit at start). A live transfer holds a socket and, between
/// its writes, its partial file; thousands of slow transfers would hold twice as many descriptors as
/// transfers, and the one that found none left would fail with `EMFILE`.
///
/// So at most half of the limit is spent on transfers (sockets: admission stops there, the rest wait
/// in the queue) and a quarter on partial files kept open between writes (past it, a partial file
/// is opened for each write and closed after it). The last quarter stays with the application, the
/// journals and the files being finished.
package struct DescriptorBudget {
    /// How many downloads may transfer at once.
    package let transfers: Int
    /// How many partial files may stay open between writes.
    package let openPartialFiles: Int

    package init(openFilesLimit limit: Int) {
        transfers = max(1, limit / 2)
        openPartialFiles = max(1, limit / 4)
    }

    /// How many descriptors the process has open now (the entries of `/proc/self/fd`, less the one
    /// that reads them), or `nil` without `/proc`.
    package static func openCount() -> Int? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 19
        while let entry = readdir(directory) {
            // The name's first byte only ("." and ".." start with a dot, descriptors with a digit).
            // The record ends after its name's NUL, often before `d_name`'s declared 256 bytes:
            // copying the whole field read past the last record of readdir's buffer, and crashed
            // the process when that was the end of a mapped page.
            if UnsafeRawPointer(entry).load(fromByteOffset: nameOffset, as: UInt8.self) == UInt8(ascii: ".") {
                continue
            }
            count += 1
        }
        return count - 1
    }

    /// The process's current (soft) open-files limit.
    package static func currentLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        return Int(min(limit.rlim_cur, UInt(Int32.max)))  // RLIM_INFINITY is the largest value
    }
}
