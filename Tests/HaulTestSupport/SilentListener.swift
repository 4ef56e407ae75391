import Glibc

/// A port on 127.0.0.1 that never completes a TCP handshake: a listener that never accepts, its
/// accept queue filled by connections of its own, so that further SYNs are dropped and a connect
/// waits until its timeout. Closed when the value goes.
final class SilentListener {
    let port: Int
    private let listener: Int32
    private let fillers: [Int32]

    init() throws {
        // A backlog of 0: the fillers below take the queue's only places.
        (listener, port) = try Descriptors.loopbackListener(backlog: 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
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
