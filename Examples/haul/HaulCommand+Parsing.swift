import ArgumentParser
import FoundationEssentials
import Glibc
import Haul

/// How option values read: sizes and rates as curl reads them, headers, what a path is.
extension HaulCommand {
    /// What is at `path` when it is neither a regular file nor a directory (following links, as
    /// the kernel does: `/dev/stdout` is the pipe or terminal it leads to); `nil` otherwise.
    static func specialFileKind(_ path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0, ![S_IFREG, S_IFDIR].contains(status.st_mode & S_IFMT) else { return nil }
        return Paths.kind(of: status.st_mode)
    }

    /// A size or rate as curl reads one: a number, optionally with a fraction, then `K`, `M` or `G`
    /// (1024, 1024², 1024³; either case) or nothing. `nil` when it is not one or not above 0.
    /// A checksum as either tool writes it: `ALGO:HEX` (haul's, `sha256:9f86…`) or aria2's
    /// `ALGO=HEX` (`sha-256=9f86…`); ALGO is sha256, sha1 or md5, with or without the dash.
    static func parseChecksum(_ text: String) -> Checksum? {
        guard let separator = text.firstIndex(where: { $0 == ":" || $0 == "=" }) else { return nil }
        let name = text[..<separator].lowercased().filter { $0 != "-" }
        guard let algorithm = Checksum.Algorithm(rawValue: name) else { return nil }
        return Checksum(algorithm: algorithm, hex: String(text[text.index(after: separator)...]).trimmingSpaces)
    }

    /// `text` as a URL to fetch: one without a scheme (`example.com/file`) gets `http://`, as curl
    /// and wget read it (`nil`: it has one already).
    /// Only a text that starts with a host (a name with a dot, `localhost`, an IPv6 address in
    /// brackets, a port after it): anything else stays as typed and is refused as a URL.
    static func withDefaultScheme(_ text: String) -> String? {
        let trimmed = text.trimmingSpaces
        guard !trimmed.isEmpty, !trimmed.contains("://"), !trimmed.contains(where: \.isWhitespace) else { return nil }
        let authority = trimmed.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host =
            authority.hasPrefix("[")
            ? authority.prefix { $0 != "]" } + "]"
            : authority.prefix { $0 != ":" }
        let hostCharacters = host.allSatisfy { $0.isLetter || $0.isNumber || "-.[]:".contains($0) }
        guard hostCharacters, host.contains(".") || host.lowercased() == "localhost" || host.hasPrefix("["),
            !host.hasPrefix("."), !host.hasSuffix(".")
        else { return nil }
        return "http://" + trimmed
    }

    /// Whether `-b`'s value names a file: as curl reads it, a value with `=` is cookies themselves.
    static func cookieIsFile(_ value: String) -> Bool { !value.contains("=") }

    static func parseSize(_ text: String) -> Int64? {
        var digits = text.trimmingSpaces
        var unit: Double = 1
        if let last = digits.last, let power = ["k": 1, "m": 2, "g": 3][last.lowercased()] {
            unit = pow(1024, Double(power))
            digits.removeLast()
        }
        guard let value = Double(digits), value.isFinite, value > 0, value * unit < 9e18 else { return nil }
        return max(1, Int64(value * unit))
    }

    /// The text of a file the user named (`-i`, `-H @FILE`), or a message that says why it cannot be
    /// read: a folder is named so, and a failure FileManager gives no `errno` for is not "Success".
    static func readText(
        of path: String,
        named what: String,
        holding lines: String,
        exitStatus: Int32 = ExitStatus.usage
    ) throws(CLIError) -> String {
        var status = stat()
        if stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR {
            throw CLIError(
                "\(what) '\(path)' is a folder; give a file of \(lines), one per line",
                exitStatus: exitStatus
            )
        }
        if path == "-" {
            // Standard input, as wget -i - and aria2c -i - read it.
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else {
                    throw CLIError(
                        "cannot read \(what) from standard input: \(String(cString: strerror(errno)))",
                        exitStatus: exitStatus
                    )
                }
                if count == 0 { break }
                bytes.append(contentsOf: chunk[..<count])
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            let cause = errno == 0 ? "it cannot be read" : String(cString: strerror(errno))
            throw CLIError("cannot read \(what) '\(path)': \(cause)", exitStatus: exitStatus)
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// A `-H` value as a header: `Name: value`, or `Name;` for an empty value (as curl reads them).
    /// The problem, in words that never repeat the value, when it is not one.
    static func parseHeader(_ text: String) -> Result<DownloadHeader, CLIError> {
        let header: DownloadHeader
        if let colon = text.firstIndex(of: ":") {
            let value = String(text[text.index(after: colon)...]).trimmingSpaces
            let name = String(text[..<colon])
            guard !value.isEmpty else {
                return .failure(CLIError("'\(name):' has no value; write '\(name);' to send it empty"))
            }
            header = DownloadHeader(name, value)
        } else if text.hasSuffix(";") {
            header = DownloadHeader(String(text.dropLast()), "")
        } else {
            return .failure(CLIError("a header is \"Name: value\" (or \"Name;\" for an empty value)"))
        }
        if let problem = header.problem() { return .failure(CLIError(problem)) }
        return .success(header)
    }

    var reporterMode: Reporter.Mode {
        if json { return .json }
        if quiet { return .quiet }
        // With the body on standard output, what haul says goes to standard error.
        return isatty(bodyGoesToStandardOutput ? STDERR_FILENO : STDOUT_FILENO) == 1 ? .bars : .lines
    }

    /// `-o`, with `-` as standard output (`/dev/stdout`, as curl and wget read it).
    var outputPath: String? { output == "-" ? "/dev/stdout" : output }

    /// Whether `-o` names a stream: standard output, a character device, a FIFO, a socket. The body
    /// is written through it, in order; nothing is made beside it.
    var outputIsStream: Bool {
        guard let path = outputPath else { return false }
        return Paths.inheritedDescriptor(of: path) != nil
            || ["a character device", "a FIFO (named pipe)", "a socket"].contains(Self.specialFileKind(path))
    }

    /// Whether bodies go through a stream or nowhere (`--discard`): nothing is kept for another run.
    var writesThrough: Bool { outputIsStream || discard }

    /// Whether the body goes to standard output (`-o -`, `/dev/stdout`, `/dev/fd/1`).
    var bodyGoesToStandardOutput: Bool { outputPath.flatMap(Paths.inheritedDescriptor(of:)) == 1 }
}

/// A number of bytes as typed: `4096`, `64K`, `1M`, `2G` (1024s, as curl's and wget's sizes).
struct ByteCount: ExpressibleByArgument, Equatable {
    let value: Int64

    init(_ value: Int64) { self.value = value }

    init?(argument: String) {
        if let plain = Int64(argument.trimmingSpaces), plain >= 0 {
            value = plain
        } else if let sized = HaulCommand.parseSize(argument) {
            value = sized
        } else {
            return nil
        }
    }

    /// As a person types it: `128K`, `4M`, `1G`, or the bytes when no unit divides them.
    var defaultValueDescription: String {
        for (unit, scale) in [("G", Int64(1) << 30), ("M", Int64(1) << 20), ("K", Int64(1) << 10)]
        where value >= scale && value % scale == 0 {
            return "\(value / scale)\(unit)"
        }
        return "\(value)"
    }
}

/// A number of seconds as typed (`30`, `0.5`), shown in `--help` as typed (`30`, not `30.0`). Not a
/// number, infinite, or more than a year: refused as ArgumentParser refuses a value it cannot read.
struct Seconds: ExpressibleByArgument, Equatable {
    let value: Double

    init(_ value: Double) { self.value = value }

    init?(argument: String) {
        guard let value = Double(argument.trimmingSpaces), value.isFinite, abs(value) <= 31_536_000 else {
            return nil
        }
        self.value = value
    }

    var defaultValueDescription: String { value == value.rounded() ? "\(Int64(value))" : "\(value)" }

    var duration: Duration { .milliseconds(Int64(value * 1000)) }
}
