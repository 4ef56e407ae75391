import Glibc

/// A port on 127.0.0.1 that never completes a TCP handshake: a listener that never accepts, its
/// accept queue filled by connections of its own, so that further SYNs are dropped and a connect
/// waits until its timeout. Closed when the value goes.
final class SilentListener {
    let port: Int
    private let listener: Int32
    private let fillers: [Int32]

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 0) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else {
            close(listener)
            throw TestFailure("could not make a listener: \(String(cString: strerror(errno)))")
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        var fillers: [Int32] = []
        for _ in 0..<8 {
            let filler = socket(
                AF_INET,
                Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
                0
            )
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, length) }
            }
            fillers.append(filler)
        }
        self.fillers = fillers
    }

    deinit {
        fillers.forEach { close($0) }
        close(listener)
    }
}
