import CHaul
import Glibc
import HaulValues

/// File-system work the loop thread hands to a background thread, so that it never waits on a disk:
/// syncing partial files, checking finished ones and renaming them into place.
///
/// The loop collects a turn's jobs and sends them in one batch (one thread wake-up for many
/// downloads); the results come back as one reactor command.
package enum DiskJob: Sendable {
    /// `fdatasync` the partial file: its first `bytes` become durable (or, for a file fetched over
    /// several connections, the bytes written of each segment in `segments`, the map's text form).
    case checkpoint(DownloadID, directory: String, path: String, bytes: Int64, segments: String? = nil)
    /// A download's bytes are all in its partial file: make them durable, check them, move them into place.
    case finish(FinishJob)

    /// The download the job is for.
    var id: DownloadID {
        switch self {
        case .checkpoint(let id, _, _, _, _): id
        case .finish(let job): job.id
        }
    }

    /// The fewest files synced together by one `syncfs` (``perform(_:clock:)``): below, each its own
    /// `fdatasync`, which costs less than writing back a whole file system for one or two files.
    static let groupSync = 4

    /// Performs a batch (the jobs a lane found waiting: those sent while its last batch ran) with one
    /// sync for all: every job writes its bytes, then one `syncfs` per file system makes them all
    /// durable (a database's group commit; shared with the other lanes that wait for one at the same
    /// time, ``SharedSync``), then each checks and renames its file. A sync that
    /// fails, or a batch too small to gain from it, falls back to a `fdatasync` per file. The syncs'
    /// time goes to `clock` (``DiskTiming``).
    static func perform(_ batch: [DiskJob], clock: inout SyncClock) -> [DiskResult] {
        guard batch.count >= groupSync else { return batch.map { $0.perform(clock: &clock) } }
        enum Step {
            case done(DiskResult)
            case checkpoint(Int32)
            case finish(FinishJob, FinishJob.Staged)
        }
        var steps: [Step] = []
        var files: [(descriptor: Int32, folder: String)] = []
        for job in batch {
            switch job {
            case .checkpoint(let id, let directory, let path, _, let segments):
                let descriptor = (try? PrivateFile.open(path, O_RDONLY)) ?? -1
                guard descriptor >= 0 else {
                    steps.append(.done(.synced(id, directory: directory, bytes: -1, segments: segments)))
                    continue
                }
                files.append((descriptor, FilePath.directory(of: path)))
                steps.append(.checkpoint(descriptor))
            case .finish(let finish):
                switch finish.stage() {
                case .ended(let result): steps.append(.done(.placed(finish.id, result)))
                case .written(let staged):
                    // (Starting each file's write-back here, `sync_file_range`, so that the sync finds
                    // less to write, was no faster and took more CPU: `Benchmarks/CHOICES.md`.)
                    // Nameless or not, its file is in the partial file's folder until it is named.
                    files.append((staged.descriptor, FilePath.directory(of: finish.partialPath)))
                    steps.append(.finish(finish, staged))
                }
            }
        }
        let synced = files.count >= groupSync && clock.timed { syncTogether(files) }
        // Which file each is about to place, told to its journal before the first is placed.
        let finishing = steps.compactMap { step -> (job: FinishJob, staged: FinishJob.Staged)? in
            if case .finish(let job, let staged) = step { (job, staged) } else { nil }
        }
        var recorded = FinishJob.recordPlacings(finishing).makeIterator()
        return zip(batch, steps).map { job, step in
            switch step {
            case .done(let result):
                return result
            case .checkpoint(let descriptor):
                let durable = synced || clock.fdatasync(descriptor)
                close(descriptor)
                guard case .checkpoint(let id, let directory, _, let bytes, let segments) = job else {
                    return .synced(job.id, directory: "", bytes: -1)
                }
                return .synced(id, directory: directory, bytes: durable ? bytes : -1, segments: segments)
            case .finish(let finish, let staged):
                switch recorded.next() ?? .success(nil) {
                case .success(let identity):
                    return .placed(
                        finish.id,
                        finish.finish(staged, synced: synced, clock: &clock, recorded: identity)
                    )
                case .failure(let error):
                    // Not placed: the journal could not say which file it is (``FinishJob/recordPlacing``).
                    close(staged.descriptor)
                    if case .staged(let staging) = staged.naming { unlink(staging) }
                    return .placed(finish.id, .failure(error))
                }
            }
        }
    }

    /// One `syncfs` per file system the `files` are on: whether all succeeded. A file system in
    /// memory (tmpfs, ramfs) has nothing to write back: its `fdatasync` does nothing, while its
    /// `syncfs` walks every inode it holds (milliseconds with thousands of files), so it is skipped.
    /// Files in one folder are on one file system: one `fstat` per folder tells which (one per file
    /// was a third of `haul -i`'s `newfstatat`s).
    private static func syncTogether(_ files: [(descriptor: Int32, folder: String)]) -> Bool {
        var folders: Set<String> = []
        var fileSystems: [UInt64: Int32] = [:]
        var status = stat()
        for file in files where folders.insert(file.folder).inserted {
            guard fstat(file.descriptor, &status) == 0 else { return false }
            if fileSystems[UInt64(status.st_dev)] == nil { fileSystems[UInt64(status.st_dev)] = file.descriptor }
        }
        return fileSystems.allSatisfy { device, descriptor in
            CHaul_isInMemory(descriptor) != 0 || SharedSync.shared.sync(device: device, descriptor: descriptor)
        }
    }

    func perform(clock: inout SyncClock) -> DiskResult {
        switch self {
        case .checkpoint(let id, let directory, let path, let bytes, let segments):
            let descriptor = (try? PrivateFile.open(path, O_RDONLY)) ?? -1
            var durable = false
            if descriptor >= 0 {
                durable = clock.fdatasync(descriptor)
                close(descriptor)
            }
            return .synced(id, directory: directory, bytes: durable ? bytes : -1, segments: segments)
        case .finish(let job):
            return .placed(job.id, job.perform(clock: &clock))
        }
    }
}
