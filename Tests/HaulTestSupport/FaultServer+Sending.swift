import Foundation
import Glibc

/// How ``FaultServer`` writes its answers: statuses, files (ranges, validators, cuts, drips, gates),
/// endless bodies and error pages.
extension FaultServer {
    func sendStatus(_ status: Int, extra: String, request: inout Request, index: Int, on connection: Int32) {
        let body = "status \(status)\n"
        let head = "HTTP/1.1 \(status) Fault\r\nContent-Length: \(body.utf8.count)\r\n\(extra)Connection: close\r\n\r\n"
        request.status = status
        note(request, at: index)
        _ = write(Data(head.utf8), to: connection)
        request.bytesSent = write(Data(body.utf8), to: connection)
    }

    /// A body without a length that goes on until the client closes (at most 1 GiB).
    func sendEndless(request: inout Request, index: Int, on connection: Int32) {
        request.status = 200
        note(request, at: index)
        guard write(Data("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8), to: connection) > 0 else { return }
        let chunk = Self.body(size: 64 * 1024)
        while request.bytesSent < 1 << 30 {
            let sent = write(chunk, to: connection)
            request.bytesSent += max(0, sent)
            guard sent == chunk.count else { return }
        }
    }

    /// What an overloaded server or load balancer sends as `200 OK`: 79 bytes of HTML, no validator.
    static let errorPage = "<html><body><h1>Too many connections</h1><p>Try again later.</p></body></html>\n"

    func sendErrorPage(request: inout Request, index: Int, on connection: Int32) {
        let body = Self.errorPage
        let head =
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        request.status = 200
        note(request, at: index)
        _ = write(Data(head.utf8), to: connection)
        request.bytesSent = write(Data(body.utf8), to: connection)
    }

    /// The routes that differ only in what their responses say of their version (see the list above).
    static let validatorRoutes: Set<String> = [
        "plain", "plain-changing", "weak-changing", "dated", "dated-fresh-changing",
    ]

    /// What a response says of its version.
    enum Validators: Equatable {
        /// A strong ETag and a Last-Modified (no Date: the Last-Modified alone is not strong).
        case strong
        /// A strong ETag, a Last-Modified and a `Date` long after it: both strong.
        case strongWithDate
        case none
        case weakTag
        /// A Last-Modified and a `Date`, and no ETag: the version's date (long before the Date:
        /// strong), or when `fresh` the Date itself (weak).
        case lastModified(fresh: Bool)
    }

    func sendFile(
        size: Int,
        version: Int = 1,
        request: inout Request,
        index: Int,
        on connection: Int32,
        limit: Int? = nil,
        honorsRange: Bool = true,
        rangeStartsAtZero: Bool = false,
        drip: (Int, Int)? = nil,
        extraLength: Int = 0,
        secondLength: Int? = nil,
        cap: Int? = nil,
        validators: Validators = .strong,
        ignoresIfRange: Bool = false,
        ignoresEntityTagIfRange: Bool = false,
        chunked: Bool = false,
        sameTag: Bool = false,
        gate: Int? = nil,
        gateAt: Int? = nil,
        announcesClose: Bool = true,
        sharedPrefix: Int = 0
    ) {
        var body = Self.body(size: size, version: version)
        if sharedPrefix > 0 {
            // A later version that kept the first `sharedPrefix` bytes of version 1 (a file edited past them).
            body.replaceSubrange(0..<min(sharedPrefix, size), with: Self.body(size: min(sharedPrefix, size)))
        }
        let now = Int(Date().timeIntervalSince1970)
        var entityTag: String? = sameTag ? "\"same\"" : "\"v\(version)-\(size)\""
        // Version 1 was last modified on RFC 9110's example date; each later version a day after.
        var lastModified: String? = Self.httpDate(784_111_777 + 86_400 * (sameTag ? 0 : version - 1))
        var date: String?
        switch validators {
        case .strong: break
        case .strongWithDate: date = Self.httpDate(now)
        case .none: (entityTag, lastModified) = (nil, nil)
        case .weakTag: (entityTag, lastModified) = ("W/\"v\(version)-\(size)\"", nil)
        case .lastModified(let fresh):
            (entityTag, date) = (nil, Self.httpDate(now))
            if fresh { lastModified = date }
        }
        // If-Range holds only with a strong validator equal to the current one (RFC 9110 §13.1.5).
        let strongValidators = [entityTag, validators == .strong ? nil : lastModified].compactMap { $0 }
            .filter { !$0.hasPrefix("W/") }
        var rangeHolds = request.ifRange == nil || ignoresIfRange || strongValidators.contains(request.ifRange!)
        if ignoresEntityTagIfRange, request.ifRange?.hasPrefix("\"") == true { rangeHolds = false }
        var start = 0
        var last: Int?
        let bounds = request.range.flatMap { range in
            range.hasPrefix("bytes=") ? range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false) : nil
        }
        if honorsRange, let bounds, bounds.count == 2, let from = Int(bounds[0]), rangeHolds {
            start = rangeStartsAtZero ? 0 : from
            last = bounds[1].isEmpty ? nil : Int(bounds[1])
        }
        var head: String
        if start >= size && size > 0 && request.range != nil && honorsRange && !rangeStartsAtZero {
            head = "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */\(size)\r\nContent-Length: 0\r\n"
            request.status = 416
            note(request, at: index)
            _ = write(Data((head + "Connection: close\r\n\r\n").utf8), to: connection)
            return
        }
        var end = size
        if let cap {
            // A server that answers every request, with a range or without, with at most `cap` bytes.
            end = min(size, start + cap)
            head = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes \(start)-\(end - 1)/\(size)\r\n"
            request.status = 206
        } else if request.range != nil && honorsRange && rangeHolds {
            if let last { end = min(size, last + 1) }
            head = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes \(start)-\(end - 1)/\(size)\r\n"
            request.status = 206
        } else {
            start = 0
            head = "HTTP/1.1 200 OK\r\n"
            request.status = 200
        }
        head += chunked ? "Transfer-Encoding: chunked\r\n" : "Content-Length: \(end - start + extraLength)\r\n"
        if let entityTag { head += "ETag: \(entityTag)\r\n" }
        if let lastModified { head += "Last-Modified: \(lastModified)\r\n" }
        if let date { head += "Date: \(date)\r\n" }
        if let secondLength { head += "Content-Length: \(secondLength)\r\n" }
        head += announcesClose ? "Accept-Ranges: bytes\r\nConnection: close\r\n\r\n" : "Accept-Ranges: bytes\r\n\r\n"
        note(request, at: index)
        guard write(Data(head.utf8), to: connection) > 0 else { return }
        let whole = end
        if let limit { end = min(end, start + limit) }
        var offset = start
        // `gate`: N bytes into each answer; `gateAt`: at byte N of the file, whatever range is asked.
        var held = gate.map { start + $0 } ?? gateAt.flatMap { $0 >= start ? $0 : nil }
        while offset < end {
            if let hold = held, offset >= hold {
                waitForGate(request.namespace)
                held = nil
            }
            var step = drip.map { min($0.0, end - offset) } ?? min(64 * 1024, end - offset)
            if let hold = held { step = min(step, hold - offset) }
            var chunk = body.subdata(in: offset..<(offset + step))
            if chunked { chunk = Data("\(String(step, radix: 16))\r\n".utf8) + chunk + Data("\r\n".utf8) }
            let sent = write(chunk, to: connection)
            request.bytesSent += max(0, min(sent, step))
            guard sent == chunk.count else { return }
            offset += step
            if let drip { usleep(useconds_t(drip.1 * 1000)) }
        }
        if chunked && end == whole { _ = write(Data("0\r\n\r\n".utf8), to: connection) }
    }

    /// `seconds` since 1970 as an IMF-fixdate.
    static func httpDate(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        var text = [CChar](repeating: 0, count: 64)
        let count = strftime(&text, text.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: text.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A silent server: waits (sending nothing) until the client closes or the server stops.
    func waitForClose(_ connection: Int32) {
        var byte: UInt8 = 0
        while recv(connection, &byte, 1, 0) > 0 {}
    }

    func write(_ data: Data, to connection: Int32) -> Int {
        data.withUnsafeBytes { buffer in
            var written = 0
            while written < buffer.count {
                let result = send(
                    connection,
                    buffer.baseAddress! + written,
                    buffer.count - written,
                    Int32(MSG_NOSIGNAL)
                )
                if result < 0 {
                    if errno == EINTR { continue }
                    return written
                }
                written += result
            }
            return written
        }
    }

    func readHead(_ connection: Int32) -> String? {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while data.count < 65536 {
            let count = recv(connection, &buffer, buffer.count, 0)
            if count <= 0 { return nil }
            data.append(contentsOf: buffer[0..<count])
            if let end = data.range(of: Data("\r\n\r\n".utf8)) {
                return String(decoding: data[..<end.lowerBound], as: UTF8.self)
            }
        }
        return nil
    }
}
