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
        var reader = Reader(text)
        var entries: [Entry] = []
        while let entry = try reader.next() { entries.append(entry) }
        return InputFile(entries: entries, ignored: reader.ignored)
    }

    /// Reads an input file one entry at a time, so that a list of millions is never held as
    /// entries: an entry is whole at the next URL line or at the end of the text.
    struct Reader {
        private let text: String
        private var position: String.Index
        private var lineNumber = 0
        /// The entry whose option lines are being read, and where its URL line starts.
        private var current: Entry?
        private var currentStart = 0
        /// Where the entry ``next()`` returned last starts in the text (its URL line's first byte):
        /// ``init(_:at:)`` reads it again from there.
        private(set) var entryStart = 0
        private var ended = false
        /// Options the file sets that haul does not support, with their line, as read so far.
        private(set) var ignored: [(option: String, line: Int)] = []

        init(_ text: String) {
            self.text = text
            position = text.utf8.startIndex
        }

        /// A reader whose first entry is the one that starts at byte `offset` of `text` (an
        /// ``entryStart`` of a reader of the same text).
        init(_ text: String, at offset: Int) {
            self.text = text
            let bytes = text.utf8
            position = bytes.index(bytes.startIndex, offsetBy: min(max(0, offset), bytes.count))
        }

        /// The next entry, `nil` after the last; throws what is wrong and on which line.
        mutating func next() throws(CLIError) -> Entry? {
            while let line = nextLine() {
                let content = line.trimmedSpaces
                if content.isEmpty || content.utf8.first == UInt8(ascii: "#") { continue }
                // An indented URL is a URL (an option's name never holds "://"), as older haul read it.
                // (Read by byte: every test here is of ASCII.)
                let bytes = content.utf8
                let isURL = Self.hasSchemeSeparator(beforeEquals: bytes)
                let indent = line.utf8.first
                guard indent == UInt8(ascii: " ") || indent == UInt8(ascii: "\t"), !isURL else {
                    let entry = Entry(urls: Self.urls(ofLine: line))
                    let start = text.utf8.distance(from: text.utf8.startIndex, to: line.startIndex)
                    defer { (current, currentStart) = (entry, start) }
                    if let done = current {
                        entryStart = currentStart
                        return done
                    }
                    continue
                }
                guard current != nil else {
                    throw CLIError("the input file's line \(lineNumber) sets an option before any URL")
                }
                guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")) else {
                    throw CLIError("the input file's line \(lineNumber) is not an option (NAME=VALUE)")
                }
                let name = content[..<equals].trimmingSpaces
                let value = content[content.utf8.index(after: equals)...].trimmingSpaces
                if let option = try InputFile.apply(name, value, line: lineNumber, to: &current!) {
                    ignored.append((option, lineNumber))
                }
            }
            defer { current = nil }
            entryStart = currentStart
            return current
        }

        /// Whether `bytes` hold "://" before their first "=" (a URL; an option's name never does).
        static func hasSchemeSeparator(beforeEquals bytes: Substring.UTF8View) -> Bool {
            var matched = 0  // how much of "://" the last bytes were
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "="): return false
                case UInt8(ascii: ":"): matched = 1
                case UInt8(ascii: "/") where matched == 1 || matched == 2:
                    matched += 1
                    if matched == 3 { return true }
                default: matched = 0
                }
            }
            return false
        }

        /// The URLs of an entry's first line: its fields between TABs, trimmed, the empty ones left out.
        static func urls(ofLine line: Substring) -> [String] {
            line.utf8.split(separator: UInt8(ascii: "\t")).map { Substring($0).trimmingSpaces }.filter { !$0.isEmpty }
        }

        /// The first URL of the entry that starts at byte `offset` of `text` (an ``entryStart``):
        /// its first line only, where ``init(_:at:)`` and ``next()`` read all of the entry.
        static func firstURL(in text: String, at offset: Int) -> String? {
            var reader = Reader(text, at: offset)
            return reader.nextLine().flatMap { urls(ofLine: $0).first }
        }

        /// The next line, ended by LF, CR LF, CR, VT or FF (found by byte: reading a list of 100,000
        /// URLs as Characters took a tenth of a rerun); `nil` after the last.
        private mutating func nextLine() -> Substring? {
            guard !ended else { return nil }
            let bytes = text.utf8
            let start = position
            var index = start
            while index != bytes.endIndex {
                let byte = bytes[index]
                guard (0x0A...0x0D).contains(byte) else {
                    index = bytes.index(after: index)
                    continue
                }
                let line = text[start..<index]
                index = bytes.index(after: index)
                if byte == 0x0D, index != bytes.endIndex, bytes[index] == 0x0A { index = bytes.index(after: index) }
                position = index
                lineNumber += 1
                return line
            }
            ended = true
            lineNumber += 1
            return text[start...]
        }

        /// Every line of the text (for tests).
        static func lines(of text: String) -> [Substring] {
            var reader = Reader(text)
            var lines: [Substring] = []
            while let line = reader.nextLine() { lines.append(line) }
            return lines
        }
    }

    /// Sets option `name` of `entry`; returns its name when haul does not support it (ignored).
    fileprivate static func apply(_ name: String, _ value: String, line: Int, to entry: inout Entry) throws(CLIError)
        -> String?
    {
        switch name {
        case "out":
            let parts = value.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            let refusal =
                ConfinedPath.refusal(value)
                ?? (parts.contains(where: { $0.isEmpty || $0.elementsEqual(".".utf8) })
                    ? "has an empty or '.' part" : nil)
            if let refusal {
                throw CLIError(
                    "the input file's out= on line \(line) must be a path inside the output folder (no '..', not "
                        + "absolute, not in .haul): '\(value)' \(refusal)"
                )
            }
            entry.out = value
        case "checksum":
            guard let checksum = HaulCommand.parseChecksum(value) else {
                throw CLIError(
                    "the input file's checksum= on line \(line) must be TYPE=HEX with TYPE sha-256, sha-1 or md5"
                )
            }
            entry.checksum = checksum
        case "header":
            switch HaulCommand.parseHeader(value) {
            case .success(let header): entry.headers.append(header)
            case .failure(let problem): throw CLIError("the input file's header= on line \(line): \(problem)")
            }
        default:
            return name
        }
        return nil
    }
}
