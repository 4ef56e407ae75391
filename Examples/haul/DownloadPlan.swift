import FoundationEssentials
import Haul

/// Where each URL of a `haul` command goes: pure functions of the arguments, unit-tested.
struct DownloadPlan: Equatable {
    struct Item: Equatable {
        var url: String
        var destination: String
    }

    var items: [Item]
    /// The folder that receives the files (and, by default, `.haul/`).
    var outputDirectory: String

    /// Resolves `-o`: a file when there is one URL and the path is not a directory (and does not end
    /// with `/`); otherwise a directory. File names come from each URL's last path component,
    /// sanitised, with `.1`, `.2`… added when two URLs would share a name, or when the name is taken by
    /// something this URL's download did not write (as wget does; curl -O would replace it). A path
    /// given with `-o` is the user's choice and is used as it is.
    ///
    /// - Parameters:
    ///   - urls: the URLs in the order given.
    ///   - output: the `-o` value, or `nil` for the current directory.
    ///   - given: for each URL, the path inside the folder its file was given (an input file's
    ///     `out=`), or `nil`: those are used as they are, never numbered, and no URL's name takes
    ///     them (a single URL that `-o` names a file for goes there all the same). Missing entries are
    ///     `nil`.
    ///   - isDirectory: whether a path is an existing directory.
    ///   - isOccupied: whether something exists at a path that is not the download of that URL there
    ///     (a file the user made, or another URL's).
    static func make(
        urls: [String],
        output: String?,
        given: [String?] = [],
        isDirectory: (String) -> Bool,
        isOccupied: (_ url: String, _ path: String) -> Bool = { _, _ in false }
    ) -> DownloadPlan {
        let given = given + [String?](repeating: nil, count: max(0, urls.count - given.count))
        var namer = Namer(
            output: output,
            urlCount: urls.count,
            givenNames: Set(given.compactMap { $0 }),
            isDirectory: isDirectory
        )
        let items = zip(urls, given).map { url, given in namer.item(url: url, given: given, isOccupied: isOccupied) }
        return DownloadPlan(items: items, outputDirectory: namer.directory)
    }

    /// ``make(urls:output:given:isDirectory:isOccupied:)`` one URL at a time, in the order given, for a
    /// list read as it is queued: it holds the names given (`out=`) and the names it chose, not the
    /// URLs.
    struct Namer {
        /// The one file `-o` names, when it names one.
        let file: String?
        /// The folder that receives the files.
        let directory: String
        /// Names given are the user's: taken before any URL is named (which is then numbered past
        /// them), and never looked up (100,000 lines with out= cost no name, stat or journal read).
        private var taken: Set<String>
        /// Per name, the suffixes tried so far: every one below `next` is taken, or in `holes`
        /// (skipped because something else was there for an earlier URL; it may be this URL's own
        /// file). The same as trying every suffix from the name itself, without 100,000 URLs of one
        /// name each trying every name before theirs.
        private var next: [String: Int] = [:]
        private var holes: [String: [Int]] = [:]

        /// - Parameters:
        ///   - urlCount: how many URLs the run has (one URL may go to the file `-o` names).
        ///   - givenNames: every path given inside the folder (`out=`), of the whole list.
        init(output: String?, urlCount: Int, givenNames: Set<String>, isDirectory: (String) -> Bool) {
            (file, directory) = DownloadPlan.resolve(output: output, urlCount: urlCount, isDirectory: isDirectory)
            taken = givenNames
        }

        private func path(_ name: String) -> String { directory == "/" ? "/\(name)" : "\(directory)/\(name)" }

        /// Where `url` goes: the file `-o` names, the path `given` inside the folder, or a name from
        /// the URL not taken by an earlier URL nor by something else there (`isOccupied`).
        mutating func item(url: String, given: String?, isOccupied: (_ url: String, _ path: String) -> Bool) -> Item {
            if let file { return Item(url: url, destination: file) }
            if let given { return Item(url: url, destination: path(given)) }
            let base = DownloadRequest.fileName(fromURL: url)
            func name(_ counter: Int) -> String { DownloadRequest.fileName(base, numbered: counter) }
            if let index = holes[base]?.firstIndex(where: { !isOccupied(url, path(name($0))) }) {
                let counter = holes[base]!.remove(at: index)
                taken.insert(name(counter))
                return Item(url: url, destination: path(name(counter)))
            }
            var counter = next[base] ?? 0
            while taken.contains(name(counter)) || isOccupied(url, path(name(counter))) {
                if !taken.contains(name(counter)) { holes[base, default: []].append(counter) }
                counter += 1
            }
            next[base] = counter + 1
            taken.insert(name(counter))
            return Item(url: url, destination: path(name(counter)))
        }
    }

    /// What `-o` names for `urlCount` URLs: the one file (when there is one URL and the path is not
    /// a directory and does not end with `/`), and the folder that receives the files.
    static func resolve(output: String?, urlCount: Int, isDirectory: (String) -> Bool) -> (
        file: String?, directory: String
    ) {
        let output = output.map { $0.isEmpty ? "." : $0 }
        if urlCount == 1, let output, !output.hasSuffix("/"), !isDirectory(output) {
            let slash = output.lastIndex(of: "/")
            let directory = slash.map { $0 == output.startIndex ? "/" : String(output[..<$0]) } ?? ""
            return (output, directory.isEmpty ? "." : directory)
        }
        var directory = output ?? "."
        while directory.count > 1 && directory.hasSuffix("/") { directory.removeLast() }
        return (nil, directory)
    }

}
