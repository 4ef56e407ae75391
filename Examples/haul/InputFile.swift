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
        // Swift reads "\r\n" as one Character, a newline.
        for (index, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let number = index + 1
            let content = line.trimmingSpaces
            if content.isEmpty || content.hasPrefix("#") { continue }
            // An indented URL is a URL (an option's name never holds "://"), as older haul read it.
            let isURL = content.prefix(while: { $0 != "=" }).contains("://")
            guard line.first == " " || line.first == "\t", !isURL else {
                let urls = line.split(separator: "\t").map(\.trimmingSpaces).filter { !$0.isEmpty }
                file.entries.append(Entry(urls: urls))
                continue
            }
            guard !file.entries.isEmpty else {
                throw CLIError("the input file's line \(number) sets an option before any URL")
            }
            guard let equals = content.firstIndex(of: "=") else {
                throw CLIError("the input file's line \(number) is not an option (NAME=VALUE)")
            }
            let name = String(content[..<equals]).trimmingSpaces
            let value = String(content[content.index(after: equals)...]).trimmingSpaces
            try apply(name, value, line: number, to: &file)
        }
        return file
    }

    private static func apply(_ name: String, _ value: String, line: Int, to file: inout InputFile) throws(CLIError) {
        let last = file.entries.count - 1
        switch name {
        case "out":
            let parts = value.split(separator: "/", omittingEmptySubsequences: false)
            guard !value.isEmpty, !value.hasPrefix("/"),
                !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." })
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
