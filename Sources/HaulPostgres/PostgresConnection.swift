import CHaulPostgres
import FoundationEssentials
import Glibc
import Haul

/// One libpq connection, used by one thread at a time (its ``FleetQueue``'s serial queue).
///
/// Every statement is parameterised (`PQexecParams`, text values): no value is ever spliced into
/// SQL. A statement that fails because the connection broke is retried once on a fresh connection
/// (`PQreset`), unless it is inside a transaction: that one fails whole (`FleetError.connection`),
/// and its caller runs it again (a statement of it retried alone would run outside it).
final class PostgresConnection {
    private var raw: OpaquePointer?
    private var inTransaction = false
    /// Statements prepared on this connection, by their text: planned once, not at every call (the
    /// claim's planning took longer than its execution). A fresh connection (`PQreset`) has none.
    private var preparedNames: [String: String] = [:]
    /// Where the connection goes, without its password: what errors and logs show.
    let target: String

    init(_ connectionString: String) throws(FleetError) {
        target = Self.redacted(connectionString)
        // libpq's message for a string it cannot read quotes a piece of it, which may be a password.
        guard Self.isReadable(connectionString) else {
            throw FleetError(
                .invalidArgument,
                target: target,
                detail: "not a connection string: give postgres://user:password@host:port/database or key=value pairs"
            )
        }
        raw = PQconnectdb(connectionString)
        guard PQstatus(raw) == CONNECTION_OK else {
            let message = Self.message(raw)
            PQfinish(raw)
            raw = nil
            throw FleetError(.connection, target: target, detail: message)
        }
        // Notices (a table that exists already) are not errors and not for stderr.
        PQsetNoticeProcessor(raw, { _, _ in }, nil)
    }

    deinit { PQfinish(raw) }

    /// The rows `sql` returns, each a list of text values (`nil` for NULL), with `parameters` for
    /// `$1`, `$2`… Reconnects once when the connection is found broken.
    @discardableResult
    func query(_ sql: String, _ parameters: [String?] = []) throws(FleetError) -> [[String?]] {
        if inTransaction { return try run(sql, parameters) }
        do {
            return try run(sql, parameters)
        } catch let error where error.code == .connection {
            PQreset(raw)
            preparedNames.removeAll()
            guard PQstatus(raw) == CONNECTION_OK else { throw error }
            return try run(sql, parameters)
        }
    }

    /// Runs `body` inside a transaction, committed when it returns and rolled back when it throws.
    func transaction<T>(_ body: () throws(FleetError) -> T) throws(FleetError) -> T {
        try query("BEGIN")
        inTransaction = true
        defer { inTransaction = false }
        do {
            let value = try body()
            _ = try run("COMMIT", [])
            return value
        } catch {
            if PQstatus(raw) == CONNECTION_OK { _ = try? run("ROLLBACK", []) }
            throw error
        }
    }

    /// The connection's socket, for waiting on notifications.
    var socket: Int32 { PQsocket(raw) }

    /// Notifications received so far (`LISTEN`): channel and payload each.
    func notifications() throws(FleetError) -> [(channel: String, payload: String)] {
        guard PQconsumeInput(raw) == 1 else {
            throw FleetError(.connection, target: target, detail: Self.message(raw))
        }
        var received: [(String, String)] = []
        while let notice = PQnotifies(raw) {
            received.append((String(cString: notice.pointee.relname), String(cString: notice.pointee.extra)))
            PQfreemem(notice)
        }
        return received
    }

    private func run(_ sql: String, _ parameters: [String?]) throws(FleetError) -> [[String?]] {
        let values = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { for value in values { free(value) } }
        var name = preparedNames[sql]
        if name == nil, !parameters.isEmpty {
            let fresh = "haul_\(preparedNames.count)"
            let prepared = PQprepare(raw, fresh, sql, Int32(parameters.count), nil)
            let status = PQresultStatus(prepared)
            PQclear(prepared)
            if status == PGRES_COMMAND_OK {
                preparedNames[sql] = fresh
                name = fresh
            }  // otherwise run as it is, which reports the error
        }
        let result = values.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { pointers in
                if let name {
                    PQexecPrepared(raw, name, Int32(parameters.count), pointers.baseAddress, nil, nil, 0)
                } else {
                    PQexecParams(raw, sql, Int32(parameters.count), nil, pointers.baseAddress, nil, nil, 0)
                }
            }
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK:
            return []
        case PGRES_TUPLES_OK:
            let (rows, columns) = (PQntuples(result), PQnfields(result))
            var table: [[String?]] = []
            table.reserveCapacity(Int(rows))
            for row in 0..<rows {
                var values: [String?] = []
                values.reserveCapacity(Int(columns))
                for column in 0..<columns {
                    values.append(
                        PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
                    )
                }
                table.append(values)
            }
            return table
        default:
            let broken = PQstatus(raw) != CONNECTION_OK
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let detail = result.flatMap { PQresultErrorMessage($0) }.map { String(cString: $0) } ?? Self.message(raw)
            throw FleetError(
                broken ? .connection : .query,
                target: target,
                detail: Self.trimmed(detail),
                sqlState: state
            )
        }
    }

    private static func message(_ raw: OpaquePointer?) -> String {
        guard let raw, let text = PQerrorMessage(raw) else { return "out of memory" }
        return trimmed(String(cString: text))
    }

    /// libpq's message without the line break it ends with (and any space around it).
    private static func trimmed(_ text: String) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }
        guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(text[first...last])
    }

    /// Whether libpq can read `connectionString`.
    static func isReadable(_ connectionString: String) -> Bool {
        var error: UnsafeMutablePointer<CChar>?
        let options = PQconninfoParse(connectionString, &error)
        if let error { PQfreemem(error) }
        guard let options else { return false }
        PQconninfoFree(options)
        return true
    }

    /// `postgres://user@host:port/database` from any connection string libpq reads (a URI or
    /// `key=value` pairs), never with its password.
    static func redacted(_ connectionString: String) -> String {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &error) else {
            if let error { PQfreemem(error) }
            return "postgres://(a connection string libpq cannot read)"
        }
        defer { PQconninfoFree(options) }
        var values: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { values[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        let user = values["user"].map { "\($0)@" } ?? ""
        let host = values["host"] ?? values["hostaddr"] ?? "localhost"
        let port = values["port"].map { ":\($0)" } ?? ""
        let database = values["dbname"].map { "/\($0)" } ?? ""
        return "postgres://\(user)\(host)\(port)\(database)"
    }
}
