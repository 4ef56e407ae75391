import Logging
import Synchronization

/// Every line a manager logs, at every level, with its metadata, for tests that look for secrets
/// in what Haul logs.
final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])

    /// A logger that writes here, at `trace`.
    var logger: Logger {
        var logger = Logger(label: "haul-test") { _ in Handler(log: self) }
        logger.logLevel = .trace
        return logger
    }

    /// What was logged so far, a line per message with its metadata.
    var text: String { lines.withLock { $0.joined(separator: "\n") } }

    fileprivate func append(_ line: String) { lines.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { $1 }
            log.append("\(event.level) \(event.message) \(all.map { "\($0)=\($1)" }.sorted().joined(separator: " "))")
        }
    }
}
