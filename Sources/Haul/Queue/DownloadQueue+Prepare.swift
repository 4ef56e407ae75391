import FoundationEssentials
import Glibc
import HaulIO
import HaulScheduler
import HaulValues
import Logging
import Tracing

/// A request checked before its row is written: its URL, its destination (a link followed, a
/// device or FIFO opened as a stream, a state folder refused), its id and its state directory.
extension DownloadQueue {
    /// A request checked and resolved to its id and state directory.
    struct PreparedRequest: Sendable {
        var url: URL
        var destination: String
        var id: HaulValues.DownloadID
        var stateDirectory: String
        var priority: Int
        var checksum: Checksum? = nil
        var expectedSize: Int64? = nil
        var userAgent: String? = nil
        /// Its own headers (the manager's defaults are added when it is sent).
        var headers: [HaulValues.DownloadHeader] = []
        /// The folder, for a download that takes its file name from the server (`destination` is
        /// then the folder too, until the name is chosen).
        var folder: String? = nil
        /// Other URLs of the file.
        var mirrors: [URL] = []
        /// Its own rate limit.
        var maxBytesPerSecond: Int64? = nil
        /// Its own number of connections.
        var connections: Int? = nil
        /// Its own logger.
        var logger: Logger? = nil
        /// The file at `destination` when the request was checked (`nil`: none, or a folder): what
        /// tells a row recorded complete whether its file is still there, without a second `stat`.
        var found: PlacedFile? = nil
        /// Whether the file found there has the request's checksum, when one was asked for: hashed
        /// when the request was checked, before the journal is locked (`nil`: not hashed).
        var foundHasChecksum: Bool? = nil
        /// The stream the body goes to, when the destination is not a regular file.
        var stream: StreamTarget? = nil
        /// A file that appears at the destination meanwhile is kept (``DownloadRequest/replacesExistingFile``).
        var keepsExistingFile = false
        /// The file found at the destination is continued when this request's row is a new one
        /// (``DownloadRequest/continuesExistingFile``, and a regular file with bytes was found).
        var continuesFound = false
        /// The folder its name must stay inside, as a standardised path (``DownloadRequest/confinedTo``).
        var confinedTo: String? = nil

        /// Its URL and its mirrors, in order; empty without mirrors.
        var allURLs: [URL] { mirrors.isEmpty ? [] : [url] + mirrors }

        /// What it gives that its row does not hold (`context`: the caller's when it asked).
        func given(context: ServiceContext?) -> CallerGiven {
            CallerGiven(
                url: url,
                headers: headers,
                urls: allURLs,
                logger: logger,
                context: context,
                stream: stream,
                provesByOverlap: continuesFound,
                confinedTo: confinedTo
            )
        }

        /// Sets the checks its file must pass in `record`, an unfinished download's row: the ones it
        /// gives replace those asked for before (a corrected checksum), and one it does not give is
        /// kept (a caller who gave none does not take the check from one who did). Refused, nothing
        /// changed, when it would change them while the file is being `placing` (its checks made:
        /// asked again once it is placed, the placed file is checked then), or when it gives a
        /// checksum or size other than one asked for while a caller holds the download's handle
        /// (`heldByCaller`): that caller would be told of a file without its checks.
        ///
        /// - Throws: `.destinationInUse` when refused.
        func takeChecks(
            into record: inout JournalRow,
            placing: Bool,
            heldByCaller: Bool
        ) throws(HaulValues.DownloadError) {
            let checksum = self.checksum?.description ?? record.expectedChecksum
            let size = expectedSize ?? record.expectedSize
            guard checksum != record.expectedChecksum || size != record.expectedSize else { return }
            // A check replaced, not added: one another request asked for.
            let replaces =
                (record.expectedChecksum != nil && checksum != record.expectedChecksum)
                || (record.expectedSize != nil && size != record.expectedSize)
            guard !placing, !(heldByCaller && replaces) else {
                throw HaulValues.DownloadError(
                    code: .destinationInUse,
                    url: url.redactedString,
                    path: destination,
                    detail: placing
                        ? "the download of it, which is placing its file checked without this request's checksum or size,"
                        : "the download of it, which another caller waits for with another checksum or size,"
                )
            }
            (record.expectedChecksum, record.expectedSize) = (checksum, size)
        }

        /// Sets what the latest request for a download decides in its row, new or existing: its
        /// priority, user agent, header names, URLs, rate limit and connections.
        func setRequested(in record: inout JournalRow) {
            record.priority = priority
            record.userAgent = userAgent
            record.headerNames = headers.map(\.name)
            record.mirrors = allURLs.map(\.redactedString)
            record.maxBytesPerSecond = maxBytesPerSecond
            record.connections = connections
            record.keepsExistingFile = keepsExistingFile
        }
    }

    /// The state folder `path` is in, if it is in one: the configured state directory, or a folder
    /// named `.haul` (the name of every default state directory) on its way.
    static func stateFolder(holding path: String, configured: String?) -> String? {
        if let configured,
            path == configured || path.hasPrefix(configured.hasSuffix("/") ? configured : configured + "/")
        {
            return configured
        }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard let index = parts.firstIndex(where: { $0 == ConfinedPath.stateFolderName }) else { return nil }
        return parts[...index].joined(separator: "/")
    }

    func prepare(_ request: DownloadRequest) throws(HaulValues.DownloadError) -> PreparedRequest {
        var folders = SharedFolderRule.KnownFolders()
        return try prepare(request, folders: &folders)
    }

    /// ``prepare(_:)`` for one request of many checked at once: `folders` keeps the shared-folder
    /// rule's walks of their folders (``SharedFolderRule/refusal(for:user:folders:)``).
    func prepare(
        _ request: DownloadRequest,
        folders: inout SharedFolderRule.KnownFolders
    ) throws(HaulValues.DownloadError) -> PreparedRequest {
        let url = try RequestRules.checkedURL(request.url)
        let headers = request.headers.engine
        try HaulValues.DownloadHeader.check(headers, url: url.redactedString)
        var mirrors: [URL] = []
        for mirror in request.mirrors { mirrors.append(try RequestRules.checkedURL(mirror)) }
        if request.discardsBody {
            return try prepareDiscarding(request, url: url, headers: headers, mirrors: mirrors)
        }
        let (destination, status, exists, inherited) = try Self.followedDestination(
            of: request,
            url: url,
            folders: &folders
        )
        let stream = try checkedStream(
            request,
            url: url,
            at: destination,
            status: status,
            exists: exists,
            inherited: inherited
        )
        let stateDirectory = try stateDirectory(of: request, url: url, at: destination, streams: stream != nil)
        let isFile = exists && (status.st_mode & S_IFMT) == S_IFREG
        let continuesFound =
            request.continuesExistingFile && stream == nil && !request.takesFileNameFromServer && isFile
            && status.st_size > 0
        return PreparedRequest(
            url: url,
            destination: destination,
            id: request.engineID,
            stateDirectory: stateDirectory,
            priority: request.priority,
            checksum: request.checksum,
            expectedSize: request.expectedSize,
            userAgent: request.userAgent,
            headers: headers,
            folder: request.takesFileNameFromServer ? destination : nil,
            mirrors: mirrors,
            maxBytesPerSecond: request.maxBytesPerSecond,
            connections: stream != nil ? 1 : request.connections.map { min(64, max(1, $0)) },
            logger: request.logger,
            found: isFile
                ? PlacedFile(length: Int64(status.st_size), modificationTime: PlacedFile.modificationTime(of: status))
                : nil,
            // A checksum is checked, not remembered: a file already there is hashed again (a file
            // corrupted in place keeps its length and mtime), outside the journal's lock.
            foundHasChecksum: request.checksum.flatMap { checksum in
                guard isFile else { return nil }
                return (try? checksum.digest(ofFileAt: destination)) == checksum.hex
            },
            stream: stream,
            // The file a request continues is the one its completion replaces.
            keepsExistingFile: !request.replacesExistingFile && !continuesFound,
            continuesFound: continuesFound,
            confinedTo: request.confinedTo.map { FilePath.standardized(URL(fileURLWithPath: $0, isDirectory: true)) }
        )
    }

    /// The request's destination as it will be written: another user's link or FIFO in a shared
    /// folder refused; a symbolic link followed to its target (as curl, wget and aria2c write
    /// through one: the file is placed, by rename, whole, at its target, and the link stays; the id
    /// stays the link's), unless it names a descriptor of this process (/dev/stdout, /dev/fd/N,
    /// /proc/self/fd/N: `inherited`); with what is there (`status`, when it `exists`).
    private static func followedDestination(
        of request: DownloadRequest,
        url: URL,
        folders: inout SharedFolderRule.KnownFolders
    ) throws(HaulValues.DownloadError) -> (destination: String, status: stat, exists: Bool, inherited: Int32?) {
        var destination = request.destinationPath
        if let refusal = SharedFolderRule.refusal(for: destination, folders: &folders) {
            // Another user's link or FIFO in a shared folder: not followed, whatever the kernel's
            // setting (``SharedFolderRule``).
            throw HaulValues.DownloadError(
                code: .untrustedDestination,
                url: url.redactedString,
                path: refusal.path,
                detail: refusal.detail
            )
        }
        var status = stat()
        var exists: Bool
        if let (path, entry) = folders.leaf, path == destination {
            // The rule's walk looked at the destination itself (not followed) already.
            switch entry {
            case .found(let found): (status, exists) = (found, true)
            case .missing: exists = false
            }
        } else {
            exists = destination.withCString { lstat($0, &status) } == 0
        }
        var inherited: Int32?
        if exists, (status.st_mode & S_IFMT) == S_IFLNK {
            inherited = FilePath.inheritedDescriptor(of: destination)
            guard let target = FilePath.linkTarget(of: destination) else {
                throw HaulValues.DownloadError(
                    code: .fileSystem,
                    url: url.redactedString,
                    errno: ELOOP,
                    path: destination,
                    detail: "the destination is a symbolic link that cannot be followed"
                )
            }
            // What is there, as the kernel follows the link (/proc's links to pipes included).
            exists = destination.withCString { stat($0, &status) } == 0
            if inherited == nil, !exists || [S_IFREG, S_IFDIR].contains(status.st_mode & S_IFMT) {
                destination = target
            }
        }
        return (destination, status, exists, inherited)
    }

    /// What is at `destination` checked against the request: a stream opened for one written
    /// through (a character device, a FIFO, a socket, standard output); nil for a file; refused for
    /// a block device, a folder where a file is asked for, and the other way round.
    private func checkedStream(
        _ request: DownloadRequest,
        url: URL,
        at destination: String,
        status: stat,
        exists: Bool,
        inherited: Int32?
    ) throws(HaulValues.DownloadError) -> StreamTarget? {
        let type = status.st_mode & S_IFMT
        var stream: StreamTarget?
        if exists, !request.takesFileNameFromServer, type != S_IFDIR,
            inherited != nil || [S_IFCHR, S_IFIFO, S_IFSOCK].contains(type)
        {
            // Written through, in order, and never replaced (as root, -o /dev/null was): a
            // character device, a FIFO (opened now: it waits for its reader, as with curl), a
            // socket, standard output.
            guard request.checksum == nil else {
                throw HaulValues.DownloadError(
                    code: .unsupportedDestination,
                    url: url.redactedString,
                    path: destination,
                    detail:
                        "\(FilePath.kind(of: status.st_mode)), and a checksum is checked on a whole file before it is "
                        + "placed, never on bytes written to a stream"
                )
            }
            stream = try StreamTarget.open(
                path: destination,
                status: status,
                inherited: inherited,
                url: url.redactedString,
                stopped: { [catalog] in catalog.isShutDown }
            )
        } else if exists, !request.takesFileNameFromServer, type != S_IFREG, type != S_IFDIR {
            // A block device is never written, nor replaced by a file.
            throw HaulValues.DownloadError(
                code: .unsupportedDestination,
                url: url.redactedString,
                path: destination,
                detail: "\(FilePath.kind(of: status.st_mode)), which Haul never writes to"
            )
        }
        if request.takesFileNameFromServer, exists, type != S_IFDIR {
            throw HaulValues.DownloadError(
                code: .fileSystem,
                url: url.redactedString,
                errno: ENOTDIR,
                path: destination,
                detail: "a download that takes its name from the server needs a folder"
            )
        }
        if !request.takesFileNameFromServer, exists, type == S_IFDIR {
            throw HaulValues.DownloadError(
                code: .fileSystem,
                url: url.redactedString,
                errno: EISDIR,
                path: destination,
                detail: "the destination is a directory; give a file path inside it"
            )
        }
        return stream
    }

    /// The state directory of the request's row: the streams' own for a stream, else the configured
    /// one or the one beside the destination's folder. A file written inside a state folder (an
    /// input line's out=.haul/journal.sqlite) is refused: it would take the place of the state itself.
    private func stateDirectory(
        of request: DownloadRequest,
        url: URL,
        at destination: String,
        streams: Bool
    ) throws(HaulValues.DownloadError) -> String {
        if streams { return streamRowsDirectory }
        if let state = Self.stateFolder(holding: destination, configured: configuredStateDirectory) {
            throw HaulValues.DownloadError(
                code: .unsupportedDestination,
                url: url.redactedString,
                path: destination,
                detail: "inside the state directory '\(state)', where Haul keeps its journal and partial files"
            )
        }
        if let configuredStateDirectory { return configuredStateDirectory }
        let folder = request.takesFileNameFromServer ? destination : FilePath.directory(of: destination)
        return FilePath.stateDirectory(besideFolder: folder)
    }
}

extension DownloadQueue {
    /// Where the row of a download into a stream (a device, a pipe, memory, nothing) goes: the
    /// manager's journal in memory (a stream's row lives for this process only).
    private var streamRowsDirectory: String { Journal.inMemoryKey }

    /// A request whose body is counted and thrown away (``DownloadRequest/discarding(_:headers:)``):
    /// nothing at a destination to look at; its row goes where a stream's does.
    private func prepareDiscarding(
        _ request: DownloadRequest,
        url: URL,
        headers: [HaulValues.DownloadHeader],
        mirrors: [URL]
    ) throws(HaulValues.DownloadError) -> PreparedRequest {
        guard request.checksum == nil else {
            throw HaulValues.DownloadError(
                code: .unsupportedDestination,
                url: url.redactedString,
                path: request.destinationPath,
                detail: "a discarded body is never a whole file, and a checksum is checked on one"
            )
        }
        return PreparedRequest(
            url: url,
            destination: request.destinationPath,
            id: request.engineID,
            stateDirectory: streamRowsDirectory,
            priority: request.priority,
            expectedSize: request.expectedSize,
            userAgent: request.userAgent,
            headers: headers,
            mirrors: mirrors,
            maxBytesPerSecond: request.maxBytesPerSecond,
            connections: 1,
            logger: request.logger,
            stream: request.collector.map { StreamTarget(collectingInto: $0, as: request.destinationPath) }
                ?? StreamTarget(discardingAs: request.destinationPath)
        )
    }
}
