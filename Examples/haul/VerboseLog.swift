import Glibc
import Logging

/// `haul -v`: the library's debug messages on standard error, as curl's `-v` shows a transfer:
/// header lines as they went (`> `) and came (`< `), values that may be secrets already redacted by
/// the library (``DownloadManager/Configuration/logsHeaders``); its other messages after `* `.
struct VerboseLog: LogHandler {
    var logLevel: Logger.Level = .debug
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let line: String
        if all["haul.headers"] != nil {
            line = "\(event.message)"
        } else {
            let details = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            line = "* \(event.message)\(details.isEmpty ? "" : " (\(details))")"
        }
        Reporter.write(line + "\n", to: STDERR_FILENO)
    }
}
