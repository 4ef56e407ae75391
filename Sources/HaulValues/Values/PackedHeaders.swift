import Glibc

/// A response's headers as libcurl parsed them, packed on the loop into one buffer (each name and
/// value followed by a zero byte) and made into ``DownloadHeader``s only when a reader asks
/// (``DownloadResponse/headers``). A body in memory keeps its response's headers, and most callers
/// never read them: packing costs one copy, where a `DownloadHeader` each cost two strings and a
/// check of the name for secrets on the loop's per-body path (issue 61).
package struct PackedHeaders: Sendable {
    private var bytes: [UInt8] = []

    package init() {}

    /// No header was packed.
    package var isEmpty: Bool { bytes.isEmpty }

    /// Adds header `name: value`, C strings.
    package mutating func append(name: UnsafePointer<CChar>, value: UnsafePointer<CChar>) {
        if bytes.isEmpty { bytes.reserveCapacity(512) }
        append(name)
        append(value)
    }

    /// Adds a C string and its zero byte.
    private mutating func append(_ string: UnsafePointer<CChar>) {
        bytes.append(contentsOf: UnsafeRawBufferPointer(start: string, count: strlen(string) + 1))
    }

    /// The headers, in the order packed.
    package func unpacked() -> [DownloadHeader] {
        var headers: [DownloadHeader] = []
        var name: String?
        var start = bytes.startIndex
        for index in bytes.indices where bytes[index] == 0 {
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            if let taken = name {
                headers.append(DownloadHeader(taken, text))
                name = nil
            } else {
                name = text
            }
            start = index + 1
        }
        return headers
    }
}
