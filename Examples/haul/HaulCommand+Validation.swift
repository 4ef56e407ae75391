import ArgumentParser
import FoundationEssentials
import Glibc
import Haul

/// The arguments checked before anything runs: a mistake is a usage error (exit 64).
extension HaulCommand {
    func validate() throws {
        try netrcFlag.validate(with: access)
        let controls = [pause, resume, cancel, wait].compactMap { $0 }
        if !controls.isEmpty {
            if queue == nil { throw ValidationError("--pause, --resume, --cancel and --wait need --queue.") }
            if controls.count > 1 || list {
                throw ValidationError("Give one of --pause, --resume, --cancel, --wait, --list.")
            }
            return
        }
        if queue != nil, !access.given.isEmpty {
            // Nothing of them would reach the workers, and a shared queue stores no secret.
            throw ValidationError(
                "with --queue, \(access.given.joined(separator: ", ")) cannot be queued: a shared queue stores no "
                    + "credentials or headers. Give them to each worker instead (haul worker -H, -u, -b, --netrc-file)."
            )
        }
        if list && verify { throw ValidationError("Give one of --list, --verify.") }
        if list || verify { return }
        if urls.isEmpty && inputFile == nil {
            throw ValidationError("Give at least one URL, or --input-file FILE.")
        }
        if discard {
            let others = [
                (output != nil, "-o"), (checksum != nil, "--checksum"), (contentDisposition, "--content-disposition"),
            ]
            for (given, flag) in others where given {
                throw ValidationError("--discard writes nothing: \(flag) cannot be used with it.")
            }
        }
        if let continueAt, continueAt != "-" {
            throw ValidationError(
                "-C takes - (continue from the file's own length, as -c): haul never skips bytes a file lacks."
            )
        }
        if continuesFile {
            let others = [(discard, "--discard"), (contentDisposition, "--content-disposition")]
            for (given, flag) in others where given {
                throw ValidationError("-c continues a file at a path known beforehand: \(flag) cannot be used with it.")
            }
            if output == "-" || outputIsStream {
                throw ValidationError("-c continues a file: -o \(output ?? "-") is a stream, written from its start.")
            }
        }
        if let maxTime, !(maxTime > 0 && maxTime <= 31_536_000) {
            throw ValidationError("--max-time must be a number of seconds above 0, such as 30 or 0.5.")
        }
        if output == "-" || output == "/dev/stdout", Self.standardOutputWasClosed {
            throw ValidationError("-o \(output!): standard output is closed. Give a file, or run haul with it open.")
        }
        if output == "-" || outputIsStream, urls.count + (inputFile == nil ? 0 : 2) != 1 {
            // A stream takes one body (curl and wget write several one after another; haul does not).
            throw ValidationError("-o \(output ?? "-") is a stream: it takes one URL.")
        }
        if let output, Self.specialFileKind(output) == "a block device" {
            throw ValidationError(
                "-o \(output) is a block device: haul never writes to one, nor replaces it with a file."
            )
        }
        if concurrency < 1 { throw ValidationError("--concurrency must be at least 1.") }
        if quiet && json { throw ValidationError("--quiet and --json cannot be used together.") }
        if let retries, retries < 0 { throw ValidationError("--retries must be 0 or more.") }
        if let checksum {
            guard Self.parseChecksum(checksum) != nil else {
                throw ValidationError(
                    "--checksum must be ALGO:HEX (or aria2's ALGO=HEX) with ALGO sha256, sha1 or md5 (sha-256, sha-1) "
                        + "and HEX of 64, 40 or 32 hexadecimal digits."
                )
            }
            if urls.count + (inputFile == nil ? 0 : 2) != 1 {
                throw ValidationError("--checksum applies to exactly one URL.")
            }
        }
    }
}
