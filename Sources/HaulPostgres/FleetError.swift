/// Why a ``FleetQueue`` operation failed: what, against which database (never with its password),
/// and what PostgreSQL said.
public struct FleetError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate let name: String
        /// The database could not be reached, refused the credentials, or the connection broke.
        public static let connection = Code(name: "connection")
        /// PostgreSQL refused a statement (see ``FleetError/sqlState``).
        public static let query = Code(name: "query")
        /// A value given to the queue is not usable (an empty worker name, a lease of no time…).
        public static let invalidArgument = Code(name: "invalidArgument")

        /// The code's name (`connection`, `query`, `invalidArgument`).
        public var description: String { name }
    }

    /// What kind of failure.
    public let code: Code
    /// The database, as `postgres://user@host:port/database`: never its password.
    public let target: String
    /// What went wrong, in PostgreSQL's or libpq's words.
    public let detail: String
    /// PostgreSQL's SQLSTATE for a refused statement (`40001` a serialization failure, …).
    public let sqlState: String?

    init(_ code: Code, target: String, detail: String, sqlState: String? = nil) {
        self.code = code
        self.target = target
        self.detail = detail
        self.sqlState = sqlState
    }

    /// Why a connection failed, as far as libpq's words tell (``connectionFailure``).
    public enum ConnectionFailure: Sendable, Hashable {
        /// The database's host name did not resolve.
        case unknownHost
        /// Nothing answered: refused, unreachable, no such socket, or connecting timed out.
        case unreachable
        /// The server answered and refused: the password, the user, the database's name, `pg_hba.conf`.
        case refused
    }

    /// Why the database could not be reached (``Code/connection`` only; `nil` when libpq's message
    /// says nothing known, or the connection broke later). libpq's messages are in English unless
    /// the process chose a locale, which Haul does not.
    public var connectionFailure: ConnectionFailure? {
        guard code == .connection else { return nil }
        if detail.contains("could not translate host name") { return .unknownHost }
        let unreachable = [
            "Connection refused", "No such file or directory", "timeout expired", "No route to host",
            "Network is unreachable", "Connection timed out", "Cannot assign requested address",
        ]
        if unreachable.contains(where: { detail.contains($0) }) { return .unreachable }
        if detail.contains("FATAL:") || detail.contains("fe_sendauth") || detail.contains("SCRAM") { return .refused }
        return nil
    }

    /// What failed, where, and why, in one line.
    public var description: String {
        let what =
            switch code {
            case .connection: "could not talk to the queue's database"
            case .query: "the queue's database refused a statement"
            default: "the queue was asked something it cannot do"
            }
        let state = sqlState.map { " (SQLSTATE \($0))" } ?? ""
        return "\(what) at \(target): \(detail)\(state)"
    }
}
