import FoundationEssentials
import Glibc

/// The server a test plays for a driven manager (``DrivenManager``): a Unix socket where every
/// connection of the manager arrives, whatever the URL's host. The test accepts each connection,
/// reads its requests and writes the answers it chooses, a byte at a time if it wants: nothing
/// happens on the wire that the test did not write.
final class ScriptedServer {
    let path: String
    private let listener: Int32
    /// Every connection accepted so far, in order.
    private(set) var connections: [ScriptedConnection] = []

    init(path: String) throws {
        self.path = path
        unlink(path)
        let listener = socket(
            AF_UNIX,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue),
            0
        )
        guard listener >= 0 else { throw ScriptedServerError("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(listener)
            throw ScriptedServerError("socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(listener, 256) == 0 else {
            let code = errno
            close(listener)
            throw ScriptedServerError("bind/listen \(path): errno \(code)")
        }
        self.listener = listener
    }

    deinit {
        for connection in connections { connection.close() }
        close(listener)
        unlink(path)
    }

    /// Accepts every connection waiting (curl's connect to a Unix socket completes at once, so a
    /// connection the manager opened in the last run is here).
    @discardableResult
    func acceptWaiting() -> [ScriptedConnection] {
        var accepted: [ScriptedConnection] = []
        while true {
            // Close-on-exec from the start (accept4): a process another test spawns between an
            // accept and a later fcntl would inherit the socket and keep it open after the test
            // closes it, and curl would never see the end of a cut answer.
            let descriptor = acceptCloseOnExec(
                listener,
                nil,
                nil,
                Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
            )
            guard descriptor >= 0 else { break }
            let connection = ScriptedConnection(descriptor: descriptor, number: connections.count)
            connections.append(connection)
            accepted.append(connection)
        }
        return accepted
    }

    /// The requests that arrived and are not answered yet, oldest connection first.
    func pendingRequests() -> [ScriptedRequest] {
        acceptWaiting()
        return connections.compactMap { $0.nextRequest() }
    }
}

struct ScriptedServerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One request as it arrived: its line and headers.
struct ScriptedRequest {
    let method: String
    let target: String
    /// Header names lowercased, in order.
    let headers: [(name: String, value: String)]
    unowned let connection: ScriptedConnection

    /// Its `Range: bytes=first-last` (`last` nil for `bytes=first-`), if it sent one.
    var range: (first: Int, last: Int?)? {
        guard let value = header("Range"), value.hasPrefix("bytes=") else { return nil }
        let bounds = value.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int(bounds[0]) else { return nil }
        return (first, Int(bounds[1]))
    }

    /// The value of header `name` (any case), if sent.
    func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }
}

/// One connection the manager opened.
final class ScriptedConnection {
    let descriptor: Int32
    /// Its place among the server's connections (0 for the first).
    let number: Int
    private var received: [UInt8] = []
    private(set) var isClosed = false
    /// Whether the manager closed its end (a read found the end of the stream).
    private(set) var peerClosed = false
    /// Requests read whole, not yet handed to the test.
    private var parsed: [ScriptedRequest] = []
    /// Requests handed to the test (``nextRequest()``).
    private(set) var requestCount = 0

    init(descriptor: Int32, number: Int) {
        self.descriptor = descriptor
        self.number = number
    }

    /// Reads what arrived, without waiting.
    func readAvailable() {
        guard !isClosed else { return }
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                received.append(contentsOf: buffer[0..<count])
            } else {
                if count == 0 { peerClosed = true }
                break
            }
        }
        parseRequests()
    }

    /// The next whole request not yet handed out, if one arrived.
    func nextRequest() -> ScriptedRequest? {
        readAvailable()
        guard !parsed.isEmpty else { return nil }
        requestCount += 1
        return parsed.removeFirst()
    }

    private func parseRequests() {
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while let range = firstRange(of: end, in: received) {
            let head = String(decoding: received[0..<range], as: UTF8.self)
            received.removeFirst(range + end.count)
            var lines = head.components(separatedBy: "\r\n")
            let first = lines.removeFirst().split(separator: " ")
            let headers = lines.compactMap { line -> (name: String, value: String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                return (String(line[..<colon]).lowercased(), value)
            }
            parsed.append(
                ScriptedRequest(
                    method: first.first.map(String.init) ?? "",
                    target: first.count > 1 ? String(first[1]) : "",
                    headers: headers,
                    connection: self
                )
            )
        }
    }

    private func firstRange(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<start + needle.count]) == needle { return start }
        }
        return nil
    }

    /// Writes as much of `bytes` as the socket takes now; returns how many it took, or `nil` when
    /// the manager closed its end (it took the request out of curl: ``peerClosed`` then).
    func write(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard !isClosed, !peerClosed else { return nil }
        guard !bytes.isEmpty else { return 0 }
        let count = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if count >= 0 { return count }
        if errno == EAGAIN || errno == EWOULDBLOCK { return 0 }
        peerClosed = true
        return nil
    }

    /// Closes the server's end: the manager's next read finds the connection cut.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(descriptor)
    }
}

/// `accept4(2)`, which Glibc's module does not import.
@_silgen_name("accept4")
private func acceptCloseOnExec(
    _ socket: Int32,
    _ address: UnsafeMutablePointer<sockaddr>?,
    _ length: UnsafeMutablePointer<socklen_t>?,
    _ flags: Int32
) -> Int32
