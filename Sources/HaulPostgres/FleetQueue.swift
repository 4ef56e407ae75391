import Dispatch
import FoundationEssentials
import Glibc
import Haul

/// A download queue in PostgreSQL that any number of processes share: each row is claimed by one
/// worker at a time under a lease, and a worker that stops renewing its leases loses its rows to
/// the others.
///
/// The queue holds what a worker needs to start a download (its URL without credentials, its
/// destination, priority, the fleet's order), who holds it (`owner`, `lease_version`,
/// `lease_expires`) and its outcome. Bytes, partial files and validators stay in each worker's own
/// ``DownloadManager`` journal: this is the fleet's queue, not its disk.
///
/// - Claims take rows with `SELECT … FOR UPDATE SKIP LOCKED` in batches, highest priority first,
///   then first in; rows whose lease expired are queued again (in their old place) before each claim.
/// - With ``Configuration/maxConcurrentDownloadsPerHost``, claims are serialised by a transaction
///   advisory lock and count the running rows per host, so the limit holds across the fleet.
/// - Fencing: ``complete(_:bytes:)``, ``fail(_:reason:)``, ``renew(_:)`` and ``release(_:)`` change
///   a row only while the caller's lease (owner and version) is the row's: a worker whose lease was
///   taken over changes nothing.
///
/// Every statement is parameterised. The connection string's password never appears in an error.
public final class FleetQueue: @unchecked Sendable {
    // @unchecked Sendable: `connection` is touched only on `queue`, a serial queue.

    /// Where the queue is and how this worker takes part.
    public struct Configuration: Sendable {
        /// A libpq connection string: `postgres://user:password@host:port/database` or `key=value` pairs.
        public var connectionString: String
        /// This process's name in the leases it takes: unique in the fleet (by default host name,
        /// process id and a random suffix).
        public var worker: String
        /// Where this process puts the files of rows queued with relative names (see
        /// ``FleetQueue/enqueue(_:relativeTo:)``): by default the current directory.
        public var outputFolder: URL = URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        /// How long a claimed row stays this worker's without a renewal. A worker renews well within it
        /// (a third); a worker that stops (killed, hung, cut off) loses its rows this long after its
        /// last renewal.
        public var leaseDuration: Duration = .seconds(30)
        /// At most this many rows of one host (`host:port`) running at once across every worker of
        /// the fleet; `nil` for no limit.
        public var maxConcurrentDownloadsPerHost: Int?

        /// The queue at `connectionString`, for `worker` (a name made unique when `nil`).
        public init(connectionString: String, worker: String? = nil) {
            self.connectionString = connectionString
            self.worker =
                worker
                ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        }
    }

    /// What the queue was made with.
    public let configuration: Configuration
    /// The database, without its password.
    public let target: String
    private let connection: PostgresConnection
    private let queue = DispatchQueue(label: "haul.fleet-queue")
    /// When this process last queued expired leases again (touched on `queue` only).
    let requeue = RequeueClock()

    final class RequeueClock: @unchecked Sendable {
        // @unchecked Sendable: used on the queue's serial queue only.
        var lastDone: ContinuousClock.Instant?
    }

    /// Connects and creates the queue's table and indexes when they are missing.
    public init(configuration: Configuration) async throws(FleetError) {
        let target = PostgresConnection.redacted(configuration.connectionString)
        guard !configuration.worker.isEmpty, configuration.leaseDuration > .zero else {
            throw FleetError(
                .invalidArgument,
                target: target,
                detail: "a worker needs a name and a lease longer than zero"
            )
        }
        // Every stored property but the connection is set before the wait for it: a `let` assigned
        // after the `await` read as empty later (Swift 6.3.1, debug build; the cause was not found).
        self.configuration = configuration
        self.target = target
        connection = try await Self.onQueue(queue) { () throws(FleetError) in
            let connection = try PostgresConnection(configuration.connectionString)
            try FleetSchema.migrate(connection)
            return connection
        }
    }

    // MARK: internals

    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws(FleetError) -> T)
        async throws(FleetError) -> T
    {
        let connection = UncheckedBox(connection)
        return try await Self.onQueue(queue) { () throws(FleetError) -> T in try body(connection.value) }
    }

    static func onQueue<T>(_ queue: DispatchQueue, _ body: @escaping () throws(FleetError) -> T)
        async throws(FleetError) -> T
    {
        let result: Result<UncheckedBox<T>, FleetError> = await withCheckedContinuation { continuation in
            let body = UncheckedBox(body)
            queue.async {
                do throws(FleetError) {
                    continuation.resume(returning: .success(UncheckedBox(try body.value())))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get().value
    }
}
