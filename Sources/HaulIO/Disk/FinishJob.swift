import CHaul
import FoundationEssentials
import Glibc
import HaulValues

/// Ends a download whose bytes are all in its partial file.
package struct FinishJob: Sendable {
    let id: DownloadID
    let partialPath: String
    var destination: String
    /// What the download's sink had not written yet (with its open file, if it opened one).
    let remainder: PartialRemainder?
    /// The remainder is the whole file and the journal does not describe it yet: the partial file
    /// must appear only whole (``PartialRemainder/writeWhole(to:)``).
    let writeWhole: Bool
    /// The server said the destination is current (a revalidation's 304): keep it, drop the partial.
    let keepDestination: Bool
    let expectedSize: Int64?
    let expectedChecksum: Checksum?
    /// The URL for errors, credentials removed.
    let url: String
    /// The modification time to give the file before it is placed (the server's Last-Modified, when
    /// asked for: `curl -R`), in seconds since 1970.
    var modificationTime: Double? = nil
    /// The URL and version the file records on itself before it is placed (``FileOrigin``).
    var origin: FileOrigin? = nil
    /// What a file already at `destination` may be for the new one to replace it.
    package enum Replacement: Sendable {
        /// Anything: the caller named the file.
        case any
        /// Only the file Haul placed there for this download (its modification time, if it placed
        /// one): the name came from the server, and a file someone put there since it was chosen is
        /// kept; the new one goes to `name.1`, `name.2`…
        case ownOnly(placedModificationTime: Double?)
    }
    var replaces = Replacement.any
    /// The download's journal, told which file is about to be placed before it is
    /// (``Journal/recordPlacing(_:identity:)``): a kill between the move and the row's commit then
    /// leaves a row that finds its file instead of fetching it again.
    var journal: Journal? = nil
    /// The folder a name someone else wrote must stay inside (``DownloadRequest/confinedTo``): the
    /// file is placed by ``finishConfined(under:_:synced:clock:recorded:)``.
    var confinedTo: String? = nil

    package init(
        id: DownloadID,
        partialPath: String,
        destination: String,
        remainder: PartialRemainder?,
        writeWhole: Bool,
        keepDestination: Bool,
        expectedSize: Int64?,
        expectedChecksum: Checksum?,
        url: String,
        modificationTime: Double? = nil,
        origin: FileOrigin? = nil,
        replaces: Replacement = .any,
        journal: Journal? = nil,
        confinedTo: String? = nil
    ) {
        self.id = id
        self.partialPath = partialPath
        self.destination = destination
        self.remainder = remainder
        self.writeWhole = writeWhole
        self.keepDestination = keepDestination
        self.expectedSize = expectedSize
        self.expectedChecksum = expectedChecksum
        self.url = url
        self.modificationTime = modificationTime
        self.origin = origin
        self.replaces = replaces
        self.journal = journal
        self.confinedTo = confinedTo
    }

    /// Syncs, checks and renames; the partial file of a wrong download is deleted, and the destination
    /// keeps what it had. The sync's time goes to `clock`.
    func perform(clock: inout SyncClock) -> Result<PlacedFile, DownloadError> {
        switch stage() {
        case .ended(let result): result
        case .written(let staged): finish(staged, synced: false, clock: &clock)
        }
    }

    /// A finish job between its writes and the sync that makes them durable (``DiskLanes`` syncs a
    /// batch of them at once).
    struct Staged: Sendable {
        let descriptor: Int32
        /// How the partial file gets its name once synced, for one written whole; `nil`: it has it.
        let naming: PartialRemainder.WholeNaming?
        /// The file's length, for one written whole.
        let length: Int64
        let pool: BufferPool?
        /// `descriptor` as one look showed it when staged (after its time was set), `nil` if it
        /// could not be looked at: its origin's time, the identity the journal records and, after
        /// the sync (which changes none of its length, time, mode or inode), the file placed.
        let status: stat?

        /// What ``PlacedFile/identity(of:)`` says of `descriptor` (its device and inode, which an
        /// open descriptor keeps).
        var identity: String? { status.map(PlacedFile.identity(of:)) }
    }

    enum Stage: Sendable {
        /// Nothing to sync: kept, or failed.
        case ended(Result<PlacedFile, DownloadError>)
        /// The bytes are written, not yet synced.
        case written(Staged)
    }

    /// Writes what is left (a whole small file into a file nobody finds at the partial's path yet)
    /// and sets the file's time; the sync and the rest are ``finish(_:synced:)``'s.
    func stage() -> Stage {
        if keepDestination {
            remainder?.discard()
            unlink(partialPath)
            return .ended(.success(PlacedFile.at(destination) ?? PlacedFile(length: 0, modificationTime: 0)))
        }
        let descriptor: Int32
        var naming: PartialRemainder.WholeNaming?
        if let remainder {
            do throws(DownloadError) {
                if writeWhole {
                    (descriptor, naming) = try remainder.stageWhole(to: partialPath)
                } else {
                    descriptor = try remainder.write(to: partialPath)
                }
            } catch {
                var error = error
                error.url = url
                return .ended(.failure(error))
            }
        } else {
            do throws(DownloadError) {
                descriptor = try PrivateFile.open(partialPath, O_RDONLY)
            } catch {
                var error = error
                error.url = url
                return .ended(.failure(error))
            }
            guard descriptor >= 0 else {
                // No partial file: an earlier run moved it into place before it could record that,
                // or someone deleted it (with the state directory) while it downloaded.
                if let placed = PlacedFile.at(destination) { return .ended(.success(placed)) }
                return .ended(.failure(Self.partialDeleted(partialPath, url: url)))
            }
        }
        if let modificationTime {
            let seconds = modificationTime.rounded(.down)
            let times = [
                timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2),  // UTIME_OMIT: the access time stays
                timespec(tv_sec: time_t(seconds), tv_nsec: Int((modificationTime - seconds) * 1e9)),
            ]
            _ = futimens(descriptor, times)
        }
        // One look at the file serves its origin's time and the identity the journal records.
        var status = stat()
        let described = fstat(descriptor, &status) == 0
        if described { origin?.record(on: descriptor, status: status) }
        return .written(
            Staged(
                descriptor: descriptor,
                naming: naming,
                length: remainder.map { $0.offset + Int64($0.count) } ?? 0,
                pool: remainder?.pool,
                status: described ? status : nil
            )
        )
    }

    /// Makes the staged bytes durable (unless `synced`: a sync of the whole file system covered
    /// them), names a file written whole, checks the file and renames it into place. The sync's time
    /// goes to `clock`.
    /// `recorded`: the file the journal was told of already (``recordPlacings(_:)``, for a batch).
    func finish(
        _ staged: Staged,
        synced: Bool,
        clock: inout SyncClock,
        recorded: String? = nil
    ) -> Result<PlacedFile, DownloadError> {
        if let root = confinedTo {
            return finishConfined(under: root, staged, synced: synced, clock: &clock, recorded: recorded)
        }
        var descriptor = staged.descriptor
        if !synced { _ = clock.fdatasync(descriptor) }
        // A partial is its owner's only (0600); the placed file gets the mode curl would give it.
        // The file as staging saw it: the sync changed nothing it shows.
        let written = staged.status ?? stat()
        let described = staged.status != nil
        if described, written.st_mode & 0o777 != FilePath.placedMode {
            fchmod(descriptor, FilePath.placedMode)
        }
        // (`written` serves the link too: a change of mode leaves the length and the time as they were.)
        var recorded = recorded
        if case .nameless = staged.naming, expectedChecksum == nil, described {
            if recorded != PlacedFile.identity(of: written) {
                do throws(DownloadError) {
                    recorded = try recordPlacing(written)
                } catch {
                    close(descriptor)
                    return .failure(error)
                }
            }
            if let placed = linkedIntoPlace(descriptor, written) { return placed }
        }
        // The file as `written` showed it, unless naming it whole gave another descriptor (a copy).
        var (status, named) = (written, described)
        if let naming = staged.naming, let pool = staged.pool {
            do throws(DownloadError) {
                descriptor = try PartialRemainder.nameWhole(
                    descriptor,
                    naming,
                    at: partialPath,
                    length: staged.length,
                    pool: pool
                )
            } catch {
                var error = error
                error.url = url
                return .failure(error)
            }
            named = fstat(descriptor, &status) == 0
        }
        let length: Int64 = named ? Int64(status.st_size) : 0
        close(descriptor)
        if let mismatch = integrityError(length: length) {
            unlink(partialPath)
            return .failure(mismatch)
        }
        if named, recorded != PlacedFile.identity(of: status) {
            do throws(DownloadError) {
                _ = try recordPlacing(status)
            } catch {
                return .failure(error)
            }
        }
        let target: String
        let renamed: Bool
        switch renameIntoPlace() {
        case .success(let moved): (target, renamed) = moved
        case .failure(let error): return .failure(error)
        }
        // A rename keeps the file and its time, as the descriptor showed them; a copy across file
        // systems does not: read it where it is now.
        Failpoint.reach("placed", target)
        var placed =
            renamed && named
            ? PlacedFile(length: length, modificationTime: PlacedFile.modificationTime(of: status))
            : PlacedFile.at(target) ?? PlacedFile(length: length, modificationTime: 0)
        if target != destination { placed.path = target }
        return .success(placed)
    }

    /// Tells each journal, in one transaction, which files the `jobs` are about to place (what each
    /// staged descriptor is): a batch's record costs one commit, not one per file. Returns, for each
    /// job, what was recorded (`nil` where nothing was: no journal, or the file could not be looked
    /// at), or why its journal could not be told: that job's file must not be placed.
    static func recordPlacings(_ jobs: [(job: FinishJob, staged: Staged)]) -> [Result<String?, DownloadError>] {
        var identities: [Result<String?, DownloadError>] = Array(repeating: .success(nil), count: jobs.count)
        var byJournal: [ObjectIdentifier: (journal: Journal, rows: [(DownloadID, String)])] = [:]
        for (index, (job, staged)) in jobs.enumerated() {
            guard let journal = job.journal, let identity = staged.identity else { continue }
            identities[index] = .success(identity)
            byJournal[ObjectIdentifier(journal), default: (journal, [])].rows.append((job.id, identity))
        }
        for (journal, rows) in byJournal.values {
            do throws(DownloadError) {
                try journal.recordPlacings(rows)
            } catch {
                for (index, (job, _)) in jobs.enumerated() where job.journal === journal {
                    identities[index] = .failure(job.placingNotRecorded(error))
                }
            }
        }
        return identities
    }

    /// Tells the journal which file is about to be placed (`status`'s); returns what it recorded.
    /// A journal that cannot be written (a full disk) stops the placement: a file placed without its
    /// row knowing would be taken, by the next run, for another's and kept beside a new copy.
    private func recordPlacing(_ status: stat) throws(DownloadError) -> String? {
        guard let journal else { return nil }
        let identity = PlacedFile.identity(of: status)
        do throws(DownloadError) {
            try journal.recordPlacing(id, identity: identity)
        } catch {
            throw placingNotRecorded(error)
        }
        return identity
    }

    /// The failure of a finished download whose file could not be recorded before it was placed:
    /// the journal's error, with this download's URL; the partial file stays where it is.
    func placingNotRecorded(_ error: DownloadError) -> DownloadError {
        var error = error
        error.url = url
        error.nothingKept = false
        return error
    }

    /// A whole file in the nameless, synced `descriptor` linked straight at its destination, where no
    /// file is there: one directory entry made, where naming it in the state directory and renaming
    /// it into place made two (`linkat` and `rename`, each a journaled change on a disk; `haul -i`
    /// over 10,000 files to ext4 made 0.01 `rename` per file, was 1.00). The destination appears
    /// whole, as a rename makes it. `nil`, with nothing changed, where it cannot be linked so (a file
    /// at the destination, a folder missing, the state directory on another file system, neither
    /// the descriptor's own link nor /proc allowed): the caller names and renames it as before.
    /// Checksums read the file by its path in the state directory, so such files go that way too.
    private func linkedIntoPlace(_ descriptor: Int32, _ status: stat) -> Result<PlacedFile, DownloadError>? {
        let length = Int64(status.st_size)
        // An older partial file this download replaced goes, as the link over it did before.
        let removeOlderPartial = { if remainder?.partialMayExist == true { unlink(partialPath) } }
        if let mismatch = integrityError(length: length) {
            close(descriptor)
            removeOlderPartial()
            return .failure(mismatch)
        }
        // A link never replaces: where the name is taken, a name chosen for the caller moves on to
        // the next free one, and Haul's own older file there is replaced by the rename path instead.
        var target = destination
        var linked = target.withCString { CHaul_link_nameless(descriptor, $0) } == 0
        if !linked, errno == EEXIST, case .ownOnly(let own) = replaces {
            let free = freeName(ownModificationTime: own)
            if !free.replacing {
                target = free.name
                linked = target.withCString { CHaul_link_nameless(descriptor, $0) } == 0
            }
        }
        guard linked else { return nil }
        Failpoint.reach("placed", target)
        close(descriptor)
        removeOlderPartial()
        var placed = PlacedFile(length: length, modificationTime: PlacedFile.modificationTime(of: status))
        if target != destination { placed.path = target }
        return .success(placed)
    }

    /// Why the finished partial file is not the expected one, if it is not.
    private func integrityError(length: Int64) -> DownloadError? {
        if let expectedSize, length != expectedSize {
            return DownloadError(
                code: .checksumMismatch,
                url: url,
                detail: "the file is \(length) bytes where \(expectedSize) were expected"
            )
        }
        guard let expectedChecksum else { return nil }
        do throws(DownloadError) {
            let actual = try Checksum.digest(
                of: try PrivateFile.open(partialPath, O_RDONLY),
                at: partialPath,
                algorithm: expectedChecksum.algorithm
            )
            guard actual == expectedChecksum.hex else {
                return DownloadError(
                    code: .checksumMismatch,
                    url: url,
                    detail:
                        "its \(expectedChecksum.algorithm.rawValue) is \(actual) where \(expectedChecksum.hex) was expected"
                )
            }
            return nil
        } catch {
            var error = error
            error.url = url
            return error
        }
    }

    /// The partial file of a finished transfer is gone (deleted, with its state directory perhaps,
    /// while the bytes were arriving): the download must start again.
    static func partialDeleted(_ path: String, url: String?) -> DownloadError {
        var error = DownloadError(
            code: .fileSystem,
            url: url,
            errno: ENOENT,
            path: path,
            detail: "the partial file was deleted before it could be moved into place"
        )
        error.nothingKept = true
        return error
    }
}
