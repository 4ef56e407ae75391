import CHaul
import Glibc

extension Reactor {
    /// Process-wide set-up for a manager that starts: curl's global state (once), and what the
    /// application lets the manager change in the whole process (see
    /// ``DownloadManager/Configuration/ignoresSIGPIPE`` and
    /// ``DownloadManager/Configuration/raisesOpenFilesLimit``): SIGPIPE ignored (curl is told
    /// `CURLOPT_NOSIGNAL`), the open-files soft limit raised to the hard one. Both are idempotent.
    /// Standard descriptors that are closed get `/dev/null` (``openClosedStandardDescriptors()``).
    package static func prepareProcess(ignoringSIGPIPE: Bool, raisingOpenFilesLimit: Bool) {
        initializeCurl()
        openClosedStandardDescriptors()
        if ignoringSIGPIPE { signal(SIGPIPE, SIG_IGN) }
        guard raisingOpenFilesLimit else { return }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }

    /// Opens `/dev/null` on descriptors 0, 1 and 2 where they are closed (a process started with
    /// `2>&-`), as SQLite does for its own files: otherwise the next file opened takes the lowest
    /// free number, and a partial file or the journal would receive what anyone in the process writes
    /// to standard output or error. A descriptor another thread takes meanwhile is left to it.
    /// Returns the descriptors that were closed.
    @discardableResult
    package static func openClosedStandardDescriptors() -> [Int32] {
        var closed: [Int32] = []
        for descriptor: Int32 in 0...2 where fcntl(descriptor, F_GETFD) < 0 && errno == EBADF {
            closed.append(descriptor)
            let null = open("/dev/null", O_RDWR)
            if null > 2 { close(null) }
        }
        return closed
    }

    /// curl's global state, set up by the first call only.
    static func initializeCurl() { initializeCurlOnce }
    fileprivate static let initializeCurlOnce: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()
}
