import Foundation
import Glibc

/// The reader of a FIFO or of a Unix socket a test made: a thread of its own reads everything until
/// the writer closes, optionally at a slow pace (`chunk` bytes, then `pause` microseconds: a consumer
/// that falls behind, so that the writer meets a full pipe).
final class StreamReader: @unchecked Sendable {
    // @unchecked Sendable: `bytes` is written by the reading thread before `done` is signalled, and
    // read only after it.
    private var bytes = Data()
    private let done = DispatchSemaphore(value: 0)

    /// Opens `path` (a FIFO) for reading now, and reads it to its end on a thread of its own.
    ///
    /// Opened before this returns, without waiting for a writer (`O_NONBLOCK`): a reader whose
    /// thread opened it later than the test's writer came and went (a busy machine) waited in
    /// `open` for another writer forever (a CI run hung there; the watchdog's stacks showed it). The
    /// thread waits in `poll` for the first bytes or for a writer that came and went (Linux reports
    /// no hang-up before a writer came), then reads blocking to the end.
    static func fifo(_ path: String, chunk: Int = 65_536, pause: useconds_t = 0) -> StreamReader {
        let reader = StreamReader()
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        Thread {
            if descriptor >= 0 {
                var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                while poll(&ready, 1, -1) < 0 && errno == EINTR {}
                _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
            }
            reader.read(descriptor, chunk: chunk, pause: pause)
        }.start()
        return reader
    }

    /// Listens on a Unix socket at `path` (made now) and reads the first connection to its end.
    static func unixSocket(_ path: String) throws -> StreamReader {
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            _ = path.utf8CString.withUnsafeBytes { raw.copyMemory(from: $0) }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(listener, 1) == 0 else {
            close(listener)
            throw TestFailure("cannot listen on \(path): \(String(cString: strerror(errno)))")
        }
        let reader = StreamReader()
        Thread {
            let connection = Descriptors.acceptClosingOnExec(listener)
            close(listener)
            reader.read(connection, chunk: 65_536, pause: 0)
        }.start()
        return reader
    }

    private func read(_ descriptor: Int32, chunk: Int, pause: useconds_t) {
        defer { done.signal() }
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: chunk)
        while true {
            let count = Glibc.read(descriptor, &buffer, chunk)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            bytes.append(contentsOf: buffer[0..<count])
            if pause > 0 { usleep(pause) }
        }
    }

    /// Everything read, once the writer closed (on a thread of its own: the shared threads stay free).
    func everything() async -> Data {
        await withCheckedContinuation { continuation in
            Thread {
                self.done.wait()
                continuation.resume(returning: self.bytes)
            }.start()
        }
    }
}
