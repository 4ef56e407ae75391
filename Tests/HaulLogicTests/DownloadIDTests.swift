import Foundation
import Testing

@testable import HaulValues

/// The layers' download ids are keyed by their first 64 bits (``DownloadID``): equal ids hash
/// alike, and ids that share those bits are still told apart.
@Suite("Download ids as keys")
struct DownloadIDTests {
    @Test("ids read back equal the ids made; ids sharing their first 16 digits differ; any text is an id")
    func equalityAndHashing() {
        let made = HaulValues.DownloadID(destinationPath: "/data/a.bin")
        let read = HaulValues.DownloadID(rawValue: String(made.rawValue))
        #expect(made == read && made.hashValue == read.hashValue)
        #expect(made != HaulValues.DownloadID(destinationPath: "/data/b.bin"))
        let first = HaulValues.DownloadID(rawValue: "0123456789abcdef" + String(repeating: "0", count: 16))
        let twin = HaulValues.DownloadID(rawValue: "0123456789abcdef" + String(repeating: "1", count: 16))
        #expect(first != twin && first.hashValue == twin.hashValue)
        #expect(Set([made, read, first, twin]).count == 3)
        // Not the hexadecimal the library makes (a fleet's key, a file edited by hand): still an id.
        for text in ["", "x", "ABCDEF0123456789ABCDEF", "0123456789abcdeg", "0123456789abcdef"] {
            let id = HaulValues.DownloadID(rawValue: text)
            #expect(
                id == HaulValues.DownloadID(rawValue: text)
                    && id.hashValue == HaulValues.DownloadID(rawValue: text).hashValue
            )
            #expect(id.rawValue == text)
        }
        #expect(
            HaulValues.DownloadID(rawValue: "0123456789abcdefA") != HaulValues.DownloadID(rawValue: "0123456789abcdefB")
        )
        #expect(HaulValues.DownloadID(rawValue: "X") != HaulValues.DownloadID(rawValue: "Y"))
    }

    @Test("a table of 20,000 random ids finds each and no other")
    func tableOfRandomIDs() {
        let ids = (0..<20_000).map { _ in HaulValues.DownloadID.random().id }
        var table: [HaulValues.DownloadID: Int] = [:]
        for (index, id) in ids.enumerated() { table[id] = index }
        #expect(table.count == Set(ids.map(\.rawValue)).count)
        for (index, id) in ids.enumerated() where table[HaulValues.DownloadID(rawValue: id.rawValue)] != index {
            Issue.record("id \(index) not found")
        }
        #expect(table[HaulValues.DownloadID(destinationPath: "/nowhere")] == nil)
    }

    @Test("ids made for no path on 8 threads at once: all different, 32 hex digits, the token their first 64 bits")
    func randomIDsAcrossThreads() async {
        let made = await withTaskGroup(of: [(id: HaulValues.DownloadID, token: UInt64)].self) { group in
            for _ in 0..<8 { group.addTask { (0..<5_000).map { _ in HaulValues.DownloadID.random() } } }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(Set(made.map(\.id.rawValue)).count == 40_000)
        #expect(Set(made.map(\.token)).count == 40_000)
        for (id, token) in made.prefix(100) {
            #expect(id.rawValue.count == 32 && id.rawValue.allSatisfy { $0.isHexDigit && !$0.isUppercase })
            #expect(id.rawValue.prefix(16) == Hexadecimal.lowercase(withUnsafeBytes(of: token) { Array($0) }))
        }
    }

    @Test("bytes in hexadecimal: two lowercase digits a byte, leading zeros kept")
    func hexadecimal() {
        #expect(Hexadecimal.lowercase([0x00, 0x0f, 0xa5, 0xff, 0x10]) == "000fa5ff10")
        #expect(Hexadecimal.lowercase([UInt8]()) == "")
        let all = (0...255).map(UInt8.init)
        #expect(Hexadecimal.lowercase(all) == all.map { String(format: "%02x", $0) }.joined())
        for byte in all {
            let expected = UInt8(String(decoding: [byte], as: UTF8.self), radix: 16)
            #expect(Hexadecimal.value(ofDigit: byte) == expected, "byte \(byte)")
        }
        #expect(ServerFileName.percentDecoded("a%2Fb%2fc%41") == Array("a/b/cA".utf8))
        #expect(ServerFileName.percentDecoded("%4") == nil && ServerFileName.percentDecoded("%g0") == nil)
    }
}
