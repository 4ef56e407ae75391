import FoundationEssentials
import Haul
import HaulPostgres

/// haul's exit statuses: one per class of failure (``DownloadError/Category``), so that a script
/// can tell a missing file from a dead host, a bad checksum or a full disk. Shown in `haul --help`
/// and the README.
enum ExitStatus {
    static let success: Int32 = 0
    /// Failures of several classes at once, or one of no class below.
    static let other: Int32 = 1
    /// Bad options or arguments (ArgumentParser's own, `EX_USAGE`).
    static let usage: Int32 = 64
    /// A local file or folder cannot be read or written.
    static let localFiles: Int32 = 7
    /// `-m/--max-time` stopped the run (curl's status for its own time limit).
    static let timeLimit: Int32 = 28

    /// The status of one failure.
    static func of(_ error: DownloadError) -> Int32 { of(error.category) }

    /// The status of a queue's failure (`--queue`, `haul worker`): a database whose host name does
    /// not resolve (3), that nothing answers for (4), or that refuses the login (2, as a server's
    /// error status); anything else 1.
    static func of(_ error: FleetError) -> Int32 {
        switch error.connectionFailure {
        case .unknownHost?: 3
        case .unreachable?: 4
        case .refused?: 2
        case nil: other
        }
    }

    /// The status of a failure of this class.
    static func of(_ category: DownloadError.Category) -> Int32 {
        switch category {
        case .httpStatus: 2
        case .nameResolution: 3
        case .connection: 4
        case .tls: 5
        case .verification: 6
        case .localFiles: localFiles
        case .transfer: 8
        case .invalidRequest: usage
        case .stopped, .other: other
        }
    }

    /// The status of a failure before any download: the input file or arguments (usage), the
    /// output folder or the journal (local files).
    static func of(_ error: any Error) -> Int32 {
        if let error = error as? DownloadError { return of(error) }
        if let error = error as? FleetError { return of(error) }
        if let error = error as? CLIError { return error.exitStatus }
        if error is CocoaError { return localFiles }
        return other
    }

    /// The status of a run whose failures had these statuses: theirs when they agree, else 1.
    static func of(failures statuses: Set<Int32>) -> Int32 {
        statuses.count == 1 ? statuses.first! : other
    }

    /// The table, as `haul --help` and the README show it.
    static let table = """
        Exit status:
          0    every download completed (or was complete already)
          1    failures of several kinds at once, or of none below
          2    the server answered with an HTTP error (404, 403, 5xx after retries),
               or the queue's database refused the login (--queue, worker)
          3    a host name (the server's, the proxy's, the queue's database's) could not be resolved
          4    no connection: refused, unreachable, or connecting timed out
          5    TLS: the handshake or the certificate's verification failed
          6    the file failed a check: --checksum, its expected size, --max-size
          7    local files: a file or folder cannot be read or written (disk full)
          8    the transfer failed midway: dropped, stalled, a misbehaving server
          28   -m/--max-time reached (as with curl): bytes kept, run it again to go on
          64   usage: bad options or arguments, a bad URL, -o at a block device
          129, 130, 143   interrupted by SIGHUP, SIGINT, SIGTERM: run it again
        """
}
