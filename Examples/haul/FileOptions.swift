import ArgumentParser
import FoundationEssentials
import Haul

/// How haul writes files: its buffer, syncs, block reservation, the largest file accepted, the
/// server's modification time, and partial files without a validator. Shared by `haul` and
/// `haul worker`; applied to a manager's configuration by ``apply(to:)``.
struct FileOptions: ParsableArguments {
    @Option(name: .long, help: "Bytes collected before each write to disk (K, M: 1024s).")
    var bufferSize: ByteCount = ByteCount(128 * 1024)

    @Option(
        name: .long,
        help: "Seconds between syncs of partial files to disk (after a reboot a partial is cut back to its last sync)."
    )
    var checkpointInterval = Seconds(5)

    @Option(
        name: .long,
        help:
            "falloc (default) reserves a file's blocks when its length is known, so a full disk fails at once; none does not."
    )
    var fileAllocation: String = "falloc"

    @Option(name: .long, help: "The largest file accepted, in bytes (K, M, G: 1024s); a larger one fails.")
    var maxSize: ByteCount?

    @Flag(name: .long, help: "Give each file the server's Last-Modified time (as curl -R and wget do).")
    var remoteTime = false

    @Flag(
        name: .long,
        help: """
            Continue a partial file even when the server gives no strong validator (ETag or Last-Modified) \
            to prove it is the same version, after checking that the 64 KiB before its end are unchanged. \
            Without this, such a partial starts over, and a stream (-o -) fails at the first drop.
            """
    )
    var resumeUnvalidated = false

    func validate() throws {
        if !(checkpointInterval.value > 0) { throw ValidationError("--checkpoint-interval must be above 0.") }
        if bufferSize.value < 4096 || bufferSize.value > 1 << 30 {
            throw ValidationError("--buffer-size must be from 4096 (4K) to 1G.")
        }
        if !["falloc", "none"].contains(fileAllocation) {
            throw ValidationError("--file-allocation must be falloc or none.")
        }
    }

    /// Sets what these options say on `configuration`.
    func apply(to configuration: inout DownloadManager.Configuration) {
        configuration.bufferSize = Int(bufferSize.value)
        configuration.checkpointInterval = checkpointInterval.duration
        configuration.preallocatesFiles = fileAllocation == "falloc"
        configuration.maximumFileSize = maxSize?.value
        configuration.setsModificationTimeFromServer = remoteTime
        configuration.resumesWithoutValidator = resumeUnvalidated
    }
}
