import FoundationEssentials
import Glibc
import Haul

/// The run's list as requests, each made when `enqueue` reads it (``next()``), not kept: a list
/// of 100,000 held about 700 bytes per URL as entries, plan items and positions for the whole run.
/// Each request is followed (``Following``) before its row is written; a URL that cannot be asked
/// for is reported (``Runner/refuse(_:error:reporter:)``) and counted in ``failures``.
final class RequestList: Sequence, IteratorProtocol {
    private let runner: Runner
    private let credentials: Credentials
    private let following: Following
    private let reporter: Reporter
    private let names: JournalNames
    private var entries: EntrySource.Iterator
    private var index = -1
    /// Names each URL in order (``DownloadPlan/Namer``), asking the journal what a name holds.
    private var namer: DownloadPlan.Namer
    /// --content-disposition: the folder in which the server names each file (unless out= does).
    private let namesFolder: String?
    /// URLs of the list that could not be asked for.
    private(set) var failures = 0

    init(
        _ runner: Runner,
        source: EntrySource,
        credentials: Credentials,
        names: JournalNames,
        following: Following,
        reporter: Reporter
    ) {
        self.runner = runner
        self.credentials = credentials
        self.names = names
        self.following = following
        self.reporter = reporter
        entries = source.makeIterator()
        namer = DownloadPlan.Namer(
            output: runner.command.outputPath,
            urlCount: source.count,
            givenNames: source.givenNames,
            isDirectory: Paths.isDirectory
        )
        namesFolder = runner.command.contentDisposition && namer.file == nil ? namer.directory : nil
    }

    /// Where the output folder is, resolved once it exists (each out= is checked inside it: a
    /// `realpath` per URL was 3 `readlink`s per file, and the placement checks again anyway).
    private var resolvedOutput: String?
    private func resolvedOutputFolder() -> String? {
        if resolvedOutput == nil { resolvedOutput = ConfinedPath.resolved(namer.directory) }
        return resolvedOutput
    }

    /// A request was refused after it was read (by `enqueue`): one more failure.
    func countFailure() { failures += 1 }

    func next() -> DownloadRequest? {
        while let entry = entries.next() {
            index += 1
            if let request = runner.command.discard ? discarding(entry) : request(for: entry) { return request }
        }
        return nil
    }

    private func discarding(_ entry: InputFile.Entry) -> DownloadRequest? {
        do {
            let request = try Runner.discardingRequest(entry, credentials: credentials)
            // Shown by its URL's name (its destination is /dev/null).
            let name = Paths.lastComponent(of: request.url.path)
            return following.follow(request.id, index: index, destination: name) ? request : nil
        } catch {
            failures += 1
            runner.refuse(
                DownloadPlan.Item(url: entry.urls[0], destination: "/dev/null"),
                error: error,
                reporter: reporter
            )
            return nil
        }
    }

    private func request(for entry: InputFile.Entry) -> DownloadRequest? {
        names.forgetLookup()  // rows written since (earlier requests') are read anew
        let item = namer.item(url: entry.urls[0], given: entry.out) { [names] in
            names.isOccupied(url: $0, path: $1, checked: entry.checksum != nil)
        }
        let folder = entry.out == nil ? namesFolder : nil
        do {
            var request = try Runner.request(
                for: item,
                entry,
                into: folder,
                workingDirectory: names.workingDirectory,
                credentials: credentials
            )
            // A name haul chose (from the URL, out=) never replaces a file someone made there
            // during the download; the file -o names is the user's to replace. A file haul placed
            // for this URL that fails its checksum is replaced too.
            request.replacesExistingFile =
                namer.file != nil || names.replaces
                || (entry.checksum != nil && names.placed(url: entry.urls[0], path: item.destination))
            if let taken = names.unknownFile, namer.file == nil, entry.out == nil,
                let note = Reporter.numberedNote(asked: taken, savedAs: item.destination)
            {
                // The name was taken by a file haul does not know: said, with the ways out.
                runner.note(note)
            }
            try Runner.confine(
                &request,
                out: entry.out,
                in: namer.directory,
                resolvedFolder: resolvedOutputFolder(),
                workingDirectory: names.workingDirectory
            )
            // -c: a file someone left there is continued (and replaced when whole).
            request.continuesExistingFile = runner.command.continuesFile
            // Before its row is written: no event for it can come earlier. Its events show its
            // destination, but for a name the server gives.
            let shownDestination = folder == nil ? nil : item.destination
            guard following.follow(request.id, index: index, destination: shownDestination) else {
                reporter.joined()  // the same destination again: one download
                return nil
            }
            return request
        } catch {
            failures += 1
            runner.refuse(item, error: error, reporter: reporter)
            return nil
        }
    }
}

/// What the journal says of the names a run chooses: a file Haul placed there from the same URL,
/// as it placed it (same length and modification time), is this download's (complete, or to be
/// revalidated); anything else there (another URL's file, a file edited since, the user's own) is
/// not replaced. One lookup per name that exists, not the whole journal in memory; the last one is
/// kept for the request being made, whose name is looked up again to know whether its file is haul's.
final class JournalNames {
    let manager: DownloadManager
    /// The working directory, read once for every relative destination; `nil` when it cannot be read
    /// (a folder deleted under the shell).
    let workingDirectory: String?
    /// -c: a file someone left at a URL's name is the one to continue, not a name taken.
    let continuesFile: Bool
    /// --force: a file someone left at a URL's name is replaced, not a name taken.
    let replaces: Bool
    private var last: (path: String, entry: JournalEntry?)?
    /// The last path this request's name was found taken at by a file haul has no record of.
    private(set) var unknownFile: String?

    init(manager: DownloadManager, continuesFile: Bool, replaces: Bool) {
        self.manager = manager
        self.continuesFile = continuesFile
        self.replaces = replaces
        let current = FileManager.default.currentDirectoryPath
        workingDirectory = current.hasPrefix("/") ? current : nil
    }

    /// The next lookups read the journal again.
    func forgetLookup() { (last, unknownFile) = (nil, nil) }

    private func entry(at path: String) -> JournalEntry? {
        let absolute = Runner.absolute(path, in: workingDirectory)
        if let last, last.path == absolute { return last.entry }
        let entry = manager.journalEntry(id: DownloadID(destination: URL(fileURLWithPath: absolute)))
        last = (absolute, entry)
        return entry
    }

    /// Whether the journal says haul placed the file at `path` for `url` (completed there).
    func placed(url: String, path: String) -> Bool {
        let entry = entry(at: path)
        return entry?.state == .completed && entry?.url == Reporter.shown(url)
    }

    /// Whether something at `path` is not the download of `url` there; `checked`: the download has a
    /// checksum.
    func isOccupied(url: String, path: String, checked: Bool) -> Bool {
        var status = stat()
        guard lstat(path, &status) == 0 else { return false }
        guard let entry = entry(at: path) else {
            guard status.st_mode & S_IFMT == S_IFREG else { return true }
            if continuesFile || replaces { return false }
            // No row (the state folder lost): a file that records this URL's download of its length
            // is that download's, checked against the server (``DownloadManager/isPlacedFile(at:from:)``).
            if DownloadManager.isPlacedFile(at: Runner.absolute(path, in: workingDirectory), from: Reporter.shown(url))
            {
                return false
            }
            unknownFile = path
            return true
        }
        guard entry.url == Reporter.shown(url) else { return true }
        // With a checksum, the file the journal says haul placed for this URL is this download's,
        // changed since or not: its digest decides whether it is kept or fetched again and
        // replaced (before: a good copy at name.1 beside the bad one, exit 0).
        return !(entry.destinationHoldsPlacedFile || (checked && entry.state == .completed))
    }
}
