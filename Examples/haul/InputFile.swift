import FoundationEssentials
import Haul

/// `haul -i FILE`: aria2's input-file form. Each line that does not start with white space is one
/// file: its URLs, separated by TABs, are mirrors of it (the first is asked first). Lines that start
/// with white space under it set its options:
///
/// ```
/// https://a.example/big.iso	https://b.example/big.iso
///   out=images/big.iso
///   checksum=sha-256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
///   header=Authorization: Bearer 0123
/// # a comment
/// https://c.example/small.txt
/// ```
///
/// Options: `out=` (a path relative to the output folder), `checksum=TYPE=HEX` (`sha-256`, `sha-1`,
/// `md5`) and `header=Name: value` (repeatable). Other aria2 options are ignored with a warning.
/// Errors name the line, never a header's value.
struct InputFile: Equatable {
    struct Entry: Equatable {
        /// The file's URLs: the first, then its mirrors.
        var urls: [String]
        /// Where it goes, relative to the output folder, when the file says.
        var out: String?
        var checksum: Checksum?
        var headers: [DownloadHeader] = []
    }

    var entries: [Entry]
    /// Options the file sets that haul does not support, with their line: ignored.
    var ignored: [(option: String, line: Int)]

    static func == (lhs: InputFile, rhs: InputFile) -> Bool {
        lhs.entries == rhs.entries && lhs.ignored.map(\.option) == rhs.ignored.map(\.option)
            && lhs.ignored.map(\.line) == rhs.ignored.map(\.line)
    }

    /// Reads `text`; throws what is wrong and on which line.
    static func parse(_ text: String) throws(CLIError) -> InputFile {
        var file = InputFile(entries: [], ignored: [])
        for (index, line) in lines(of: text).enumerated() {
            let number = index + 1
            let content = line.trimmingSpaces
            if content.isEmpty || content.utf8.first == UInt8(ascii: "#") { continue }
            // An indented URL is a URL (an option's name never holds "://"), as older haul read it.
            // (Read by byte: every test here is of ASCII.)
            let bytes = content.utf8
            let beforeEquals = bytes.prefix { $0 != UInt8(ascii: "=") }
            let isURL = beforeEquals.indices.contains { index in
                beforeEquals[index...].starts(with: "://".utf8)
            }
            let indent = line.utf8.first
            guard indent == UInt8(ascii: " ") || indent == UInt8(ascii: "\t"), !isURL else {
                let urls = line.utf8.split(separator: UInt8(ascii: "\t")).map { Substring($0).trimmingSpaces }
                file.entries.append(Entry(urls: urls.filter { !$0.isEmpty }))
                continue
            }
            guard !file.entries.isEmpty else {
                throw CLIError("the input file's line \(number) sets an option before any URL")
            }
            guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")) else {
                throw CLIError("the input file's line \(number) is not an option (NAME=VALUE)")
            }
            let name = content[..<equals].trimmingSpaces
            let value = content[content.utf8.index(after: equals)...].trimmingSpaces
            try apply(name, value, line: number, to: &file)
        }
        return file
    }

    /// The lines of `text`, ended by LF, CR LF, CR, VT or FF (found by byte: reading a list of
    /// 100,000 URLs as Characters took a tenth of a rerun).
    static func lines(of text: String) -> [Substring] {
        var lines: [Substring] = []
        let bytes = text.utf8
        var start = bytes.startIndex
        var index = start
        while index != bytes.endIndex {
            let byte = bytes[index]
            guard (0x0A...0x0D).contains(byte) else {
                index = bytes.index(after: index)
                continue
            }
            lines.append(text[start..<index])
            index = bytes.index(after: index)
            if byte == 0x0D, index != bytes.endIndex, bytes[index] == 0x0A { index = bytes.index(after: index) }
            start = index
        }
        lines.append(text[start...])
        return lines
    }

    private static func apply(_ name: String, _ value: String, line: Int, to file: inout InputFile) throws(CLIError) {
        let last = file.entries.count - 1
        switch name {
        case "out":
            let parts = value.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            guard !value.isEmpty, value.utf8.first != UInt8(ascii: "/"),
                !parts.contains(where: { $0.isEmpty || $0.elementsEqual(".".utf8) || $0.elementsEqual("..".utf8) })
            else {
                throw CLIError(
                    "the input file's out= on line \(line) must be a path inside the output folder (no '..', not absolute)"
                )
            }
            file.entries[last].out = value
        case "checksum":
            let algorithms = ["sha-256": "sha256", "sha-1": "sha1", "md5": "md5"]
            guard let equals = value.firstIndex(of: "="),
                let algorithm = algorithms[value[..<equals].lowercased()],
                let checksum = Checksum("\(algorithm):\(value[value.index(after: equals)...])")
            else {
                throw CLIError(
                    "the input file's checksum= on line \(line) must be TYPE=HEX with TYPE sha-256, sha-1 or md5"
                )
            }
            file.entries[last].checksum = checksum
        case "header":
            switch HaulCommand.parseHeader(value) {
            case .success(let header): file.entries[last].headers.append(header)
            case .failure(let problem): throw CLIError("the input file's header= on line \(line): \(problem)")
            }
        default:
            file.ignored.append((name, line))
        }
    }
}
