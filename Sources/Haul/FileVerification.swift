import FoundationEssentials
import HaulIO
import HaulValues

/// What ``DownloadManager/verify(stateDirectory:)`` found of one completed download's file, hashed
/// again, without fetching anything.
public struct FileVerification: Sendable, Hashable {
    /// What the file at the destination is now.
    public enum Outcome: Sendable, Hashable {
        /// Its digest is the recorded checksum's.
        case matches
        /// Its digest (this one, in lowercase hexadecimal) is not the recorded checksum's: the file
        /// was changed or corrupted since it was placed. Asking for the download again with its
        /// checksum fetches it again.
        case differs(actual: String)
        /// There is no file at the destination (or it cannot be read: `detail` says why).
        case missing(detail: String)
        /// No checksum was asked for, so none is recorded: only the length and modification time
        /// Haul placed it with can be compared (`holdsPlacedFile`, ``JournalEntry/destinationHoldsPlacedFile``).
        case notRecorded(holdsPlacedFile: Bool)
    }

    /// The download, as the journal records it.
    public var entry: JournalEntry
    /// What its file is now.
    public var outcome: Outcome

    /// Whether nothing is wrong with the file as far as can be known: it matches its checksum, or
    /// has none and still has the length and modification time it was placed with.
    public var isIntact: Bool {
        switch outcome {
        case .matches: true
        case .notRecorded(let placed): placed
        case .differs, .missing: false
        }
    }
}

extension DownloadManager {
    /// Hashes the file of every completed download in `stateDirectory`'s journal against the
    /// checksum recorded for it, without fetching anything (as `aria2c -V` checks a file): a file
    /// corrupted in place keeps its length and modification time, which only its digest tells.
    /// Files of downloads asked for without a checksum are compared by length and modification time.
    ///
    /// Reads the whole of each file: run it off any thread that must stay responsive.
    ///
    /// - Throws: ``DownloadError`` with code `.journal` when there is no usable journal there.
    public static func verify(stateDirectory: URL) throws -> [FileVerification] {
        try journalEntries(stateDirectory: stateDirectory).filter { $0.state == .completed }.map { entry in
            guard let checksum = entry.checksum else {
                return FileVerification(
                    entry: entry,
                    outcome: .notRecorded(holdsPlacedFile: entry.destinationHoldsPlacedFile)
                )
            }
            do throws(HaulValues.DownloadError) {
                let actual = try checksum.digest(ofFileAt: entry.destination)
                return FileVerification(
                    entry: entry,
                    outcome: actual == checksum.hex ? .matches : .differs(actual: actual)
                )
            } catch {
                return FileVerification(entry: entry, outcome: .missing(detail: error.cause))
            }
        }
    }
}
