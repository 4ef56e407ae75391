import Foundation
import Glibc

/// What this process has open, read from /proc/self/fd: for tests that check which files and
/// connections Haul holds; and the fixtures' accepted connections, closed on exec.
enum Descriptors {
    /// `accept(2)` with the connection closed on exec (Glibc's module has no `accept4`): nginx and
    /// haul children that other tests spawn meanwhile must not hold a copy, or closing it here sends
    /// no FIN and the client waits for bytes that never come.
    static func acceptClosingOnExec(_ listener: Int32) -> Int32 {
        let connection = accept(listener, nil, nil)
        if connection >= 0 { _ = fcntl(connection, F_SETFD, FD_CLOEXEC) }
        return connection
    }

    /// A TCP socket listening on 127.0.0.1 at a free port (closed on exec, `SO_REUSEADDR`, a backlog
    /// of `backlog`), and that port: the fault server's, the fault relay's and the silent listener's.
    static func loopbackListener(backlog: Int32 = 512) throws -> (descriptor: Int32, port: Int) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw TestFailure("socket() failed") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, backlog) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else {
            close(listener)
            throw TestFailure("bind/listen failed: \(String(cString: strerror(errno)))")
        }
        return (listener, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Every open descriptor's number.
    static func all() -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap(Int32.init)
    }

    /// The paths of the descriptors open on files in `directory`.
    static func files(in directory: String) -> [String] {
        let prefix = directory.hasSuffix("/") ? directory : directory + "/"
        return all().compactMap { descriptor in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")
            else { return nil }
            return target.hasPrefix(prefix) ? target : nil
        }
    }

    /// The Unix-domain sockets (curl's wake-up pair for each multi handle among them).
    static func unixSockets() -> [Int32] {
        all().filter { descriptor in
            var domain: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(descriptor, SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0 && domain == AF_UNIX
        }
    }

    /// The TCP sockets whose peer is 127.0.0.1:`port`.
    static func connected(toPort port: Int) -> [Int32] {
        all().filter { descriptor in
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let found = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) == 0 }
            }
            return found && address.sin_family == sa_family_t(AF_INET)
                && Int(UInt16(bigEndian: address.sin_port)) == port
        }
    }
}
