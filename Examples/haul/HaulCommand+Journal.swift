import ArgumentParser
import FoundationEssentials
import Glibc
import Haul

/// `--list` and `--verify`: the journal of a state directory, read without downloading.
extension HaulCommand {
    /// The state directory `--list` and `--verify` read; `nil` (and a message) when it has no journal.
    func journalDirectory() -> String? {
        let directory = state ?? DownloadManager.defaultStateDirectory(besideFolder: output ?? ".")
        guard FileManager.default.fileExists(atPath: "\(directory)/journal.sqlite") else {
            Reporter.write(
                "haul: no journal in '\(directory)': nothing was downloaded with this state directory\n",
                to: STDERR_FILENO
            )
            return nil
        }
        return directory
    }

    /// `--verify`: one line per completed download, its file hashed again.
    func verifyJournal() -> Int32 {
        guard let directory = journalDirectory() else { return 1 }
        let results: [FileVerification]
        do {
            results = try DownloadManager.verify(stateDirectory: URL(fileURLWithPath: directory, isDirectory: true))
        } catch {
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            return 1
        }
        for result in results {
            let entry = result.entry
            var line = JSONEvent.Verified(
                id: entry.id.rawValue,
                url: Reporter.shown(entry.url),
                path: entry.destination,
                result: "matches",
                intact: result.isIntact,
                expected: entry.checksum?.description
            )
            let text: String
            switch result.outcome {
            case .matches:
                text = "ok         \(entry.destination) (\(entry.checksum?.algorithm.rawValue ?? "checksum") matches)"
            case .differs(let actual):
                (line.result, line.actual) = ("differs", actual)
                // The command that repairs it: the same journal, the file named (-o replaces it),
                // the checksum that fails (a URL's password is not in the journal: add it back).
                let state =
                    directory.hasPrefix("/")
                    ? directory : FileManager.default.currentDirectoryPath + "/" + directory
                let repair = [
                    "haul", "--state", state, "--checksum", entry.checksum?.description ?? "?", "-o",
                    entry.destination, Reporter.shown(entry.url),
                ].map(Self.shellQuoted).joined(separator: " ")
                text =
                    "DIFFERS    \(entry.destination): expected \(entry.checksum?.description ?? "?"), the file has "
                    + "\(actual); to fetch it again and replace it: \(repair)"
            case .missing(let detail):
                (line.result, line.detail) = ("missing", detail)
                text = "MISSING    \(entry.destination): \(detail)"
            case .notRecorded(let placed):
                line.result = "notRecorded"
                text =
                    placed
                    ? "unchecked  \(entry.destination) (no checksum was asked for; length and mtime as placed)"
                    : "CHANGED    \(entry.destination) (no checksum was asked for; its length or mtime changed since)"
            }
            Reporter.write(json ? JSONEvent.line(line) : text + "\n", to: STDOUT_FILENO)
        }
        if results.isEmpty, !json { Reporter.write("no completed downloads in \(directory)\n", to: STDOUT_FILENO) }
        return results.allSatisfy(\.isIntact) ? 0 : 1
    }

    /// The listing's last line: how many downloads are complete, partial (bytes kept: the next run
    /// continues them), failed (with their reason above), cancelled, and waiting or running.
    static func listSummary(_ entries: [(state: QueueState, bytes: Int64)]) -> String {
        var (complete, partial, failed, cancelled, waiting) = (0, 0, 0, 0, 0)
        for entry in entries {
            switch entry.state {
            case .completed: complete += 1
            case .failed: failed += 1
            case .cancelled: cancelled += 1
            case .paused, .interrupted, .waitingToRetry: if entry.bytes > 0 { partial += 1 } else { waiting += 1 }
            case .queued, .running: waiting += 1
            }
        }
        var parts = ["\(complete) complete", "\(partial) partial", "\(failed) failed"]
        if cancelled > 0 { parts.append("\(cancelled) cancelled") }
        if waiting > 0 { parts.append("\(waiting) queued or running") }
        return "\(entries.count) download\(entries.count == 1 ? "" : "s"): " + parts.joined(separator: ", ")
    }

    /// `text` as one word of a POSIX shell: as it is when it is made of safe characters only, else
    /// in single quotes (a quote in it written `'\''`).
    static func shellQuoted(_ text: String) -> String {
        let safe = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,")
        guard !text.isEmpty, !text.contains(where: { !safe.contains($0) }) else {
            return "'" + text.replacing("'", with: "'\\''") + "'"
        }
        return text
    }

    /// `--list`: one line per download in the journal.
    func listJournal() -> Int32 {
        guard let directory = journalDirectory() else { return 1 }
        do {
            let entries = try DownloadManager.journalEntries(
                stateDirectory: URL(fileURLWithPath: directory, isDirectory: true)
            )
            if json {
                for entry in entries {
                    let line = JSONEvent.ListEntry(
                        id: entry.id.rawValue,
                        url: entry.url,
                        path: entry.destination,
                        state: entry.state.description,
                        bytesReceived: entry.bytesReceived,
                        totalBytes: entry.totalBytes,
                        lastError: entry.lastError
                    )
                    Reporter.write(JSONEvent.line(line), to: STDOUT_FILENO)
                }
                return 0
            }
            for entry in entries {
                let total = entry.totalBytes.map { Reporter.size($0) } ?? "?"
                let percent = entry.totalBytes.flatMap { $0 > 0 ? " \(entry.bytesReceived * 100 / $0)%" : nil } ?? ""
                var line = "\(entry.state.description.padded(to: 11)) "
                line += "\(Reporter.size(entry.bytesReceived))/\(total)\(percent)  \(entry.url) -> \(entry.destination)"
                if let error = entry.lastError, entry.state == .failed { line += "\n          \(error)" }
                Reporter.write(line + "\n", to: STDOUT_FILENO)
            }
            if entries.isEmpty {
                Reporter.write("no downloads in \(directory)\n", to: STDOUT_FILENO)
            } else {
                Reporter.write(Self.listSummary(entries.map { ($0.state, $0.bytesReceived) }) + "\n", to: STDOUT_FILENO)
            }
            return 0
        } catch {
            Reporter.write("haul: \(Runner.describe(error))\n", to: STDERR_FILENO)
            return 1
        }
    }
}
