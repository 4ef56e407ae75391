/// Bytes in lowercase hexadecimal, written straight into one string (a download's id, a file's
/// checksum, a URL's hash): not a string per byte joined, which cost a finished file about 32
/// allocations for its origin's hash alone. And a digit read back.
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

    /// The value of the hexadecimal digit `byte` (either case), or `nil` if it is not one.
    package static func value(ofDigit byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte &- UInt8(ascii: "A") &+ 10
        default: nil
        }
    }
}
