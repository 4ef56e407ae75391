import FoundationEssentials
import Glibc
import Haul

/// The files one run fetches, read as they are queued: the arguments' URLs (each with
/// `--checksum`, when given), then the input file's entries. A list of millions is held as its text
/// (the bytes of the file) and where each entry starts, not as entries, plan items and requests:
/// about 55 bytes a URL instead of 700.
///
/// Made by ``HaulCommand/entrySource()``, which reads the whole input file once first: a mistake on
/// its last line stops the run before any download starts, the run knows how many files it has,
/// and the names given with `out=` are known before any URL is named (no URL's name takes one).
struct EntrySource: Sequence {
    /// The arguments' URLs.
    let arguments: [InputFile.Entry]
    /// The input file, checked.
    let text: String?
    /// How many entries there are.
    let count: Int
    /// Every path given inside the output folder (`out=`), when some entry has none (the names its
    /// URL may not take); empty when every entry has one (nothing is named from a URL).
    let givenNames: Set<String>
    /// Where each of the input file's entries starts in ``text`` (8 bytes an entry): what a run
    /// shows of a download is read again from there (``url(at:)``), not kept per download.
    let starts: [Int]

    /// The first URL of entry `index` of the run (the arguments' first, then the input file's), read
    /// again: what a line or `--json` shows of a download.
    func url(at index: Int) -> String? {
        if index < arguments.count { return index >= 0 ? arguments[index].urls.first : nil }
        let position = index - arguments.count
        guard let text, position < starts.count else { return nil }
        return InputFile.Reader.firstURL(in: text, at: starts[position])
    }

    func makeIterator() -> Iterator {
        Iterator(arguments: arguments.makeIterator(), reader: text.map(InputFile.Reader.init))
    }

    struct Iterator: IteratorProtocol {
        var arguments: IndexingIterator<[InputFile.Entry]>
        var reader: InputFile.Reader?

        mutating func next() -> InputFile.Entry? {
            if let entry = arguments.next() { return entry }
            // The text was read through once without an error (``HaulCommand/entrySource()``), and
            // reading it again reads the same entries.
            guard let entry = try? reader?.next() else { return nil }
            return entry
        }
    }
}

extension HaulCommand {
    /// The run's ``EntrySource``: none is an error, and each ignored option of the input file is
    /// reported on standard error.
    func entrySource() throws -> EntrySource {
        let checksum = self.checksum.flatMap(HaulCommand.parseChecksum)
        let arguments = urls.map { url in
            // A URL typed without a scheme is fetched over http://, as curl and wget do; said once each.
            guard let fixed = HaulCommand.withDefaultScheme(url) else {
                return InputFile.Entry(urls: [url], checksum: checksum)
            }
            Reporter.write(
                "haul: '\(Reporter.shown(url))' has no scheme: fetching \(Reporter.shown(fixed))\n",
                to: STDERR_FILENO
            )
            return InputFile.Entry(urls: [fixed], checksum: checksum)
        }
        var text: String?
        var count = arguments.count
        var givenNames: Set<String> = []
        var starts: [Int] = []
        var someUnnamed = !arguments.isEmpty
        if let inputFile {
            let checked = try HaulCommand.readText(
                of: inputFile,
                named: "the input file",
                holding: "URLs",
                exitStatus: ExitStatus.localFiles
            )
            var reader = InputFile.Reader(checked)
            while let entry = try reader.next() {
                count += 1
                starts.append(reader.entryStart)
                if let out = entry.out { givenNames.insert(out) } else { someUnnamed = true }
            }
            for (option, line) in reader.ignored {
                Reporter.write(
                    "haul: the input file's option '\(option)' (line \(line)) is not supported and is ignored\n",
                    to: STDERR_FILENO
                )
            }
            text = checked
        }
        guard count > 0 else { throw CLIError("the input file has no URLs") }
        return EntrySource(
            arguments: arguments,
            text: text,
            count: count,
            givenNames: someUnnamed ? givenNames : [],
            starts: starts
        )
    }
}
