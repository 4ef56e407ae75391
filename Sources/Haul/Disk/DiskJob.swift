import Glibc

/// File-system work the loop thread hands to a background thread, so that it never waits on a disk:
/// syncing partial files, checking finished ones and renaming them into place.
///
/// The loop collects a turn's jobs and sends them in one batch (one thread wake-up for many
/// downloads); the results come back as one reactor command.
enum DiskJob: Sendable {
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

    func perform() -> DiskResult {
        switch self {
        case .checkpoint(let id, let directory, let path, let bytes, let segments):
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            var durable = false
            if descriptor >= 0 {
                durable = fdatasync(descriptor) == 0
                close(descriptor)
            }
            return .synced(id, directory: directory, bytes: durable ? bytes : -1, segments: segments)
        case .finish(let job):
            return .finished(job.id, job.perform())
        }
    }
}
