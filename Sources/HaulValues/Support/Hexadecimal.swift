/// Bytes in lowercase hexadecimal, written straight into one string (a download's id, a file's
/// checksum, a URL's hash): not a string per byte joined, which cost a finished file about 32
/// allocations for its origin's hash alone.
package enum Hexadecimal {
    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// `bytes` in lowercase hexadecimal, two digits a byte.
    package static func lowercase<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        let count = bytes.count
        return String(unsafeUninitializedCapacity: 2 * count) { text in
            var index = 0
            for byte in bytes {
                text[index] = digits[Int(byte >> 4)]
                text[index + 1] = digits[Int(byte & 0x0f)]
                index += 2
            }
            return index
        }
    }
}
