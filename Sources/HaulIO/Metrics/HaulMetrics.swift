import CoreMetrics
import HaulValues
import Synchronization

/// A manager's metrics (swift-metrics), made once when it starts: counting costs a call on an
/// object kept here, and nothing more while no backend is bootstrapped (swift-metrics' no-op
/// handlers). Names follow Prometheus' conventions (snake case, `haul_` first, `_total` on counters,
/// units last), which is what swift-metrics backends export; README lists them.
package final class HaulMetrics: Sendable {
    /// Downloads admitted to transfer (each admission, a retry's too).
    package let started: Counter
    /// Downloads whose file was put in place.
    package let completed: Counter
    /// Retries scheduled after a failure.
    package let retries: Counter
    /// Body bytes received from servers.
    package let bytesReceived: Counter
    /// Body bytes received again: a restart's discarded partial, an unvalidated resume's overlap.
    package let bytesResent: Counter
    /// Downloads transferring now.
    package let running: Gauge
    /// Downloads queued in the open journals (those waiting for a retry's time included).
    package let queued: Gauge
    /// Queued downloads waiting for a retry's time.
    package let waitingToRetry: Gauge
    /// Write buffers in use.
    package let writeBuffersInUse: Gauge
    /// Partial files held open between writes.
    package let partialFilesOpen: Gauge
    /// Descriptors the process has open (sockets, partial files, journals, the application's own):
    /// what `RLIMIT_NOFILE` bounds.
    package let openDescriptors: Gauge
    /// From a request's start to its accepted answer's first body byte.
    package let timeToFirstByte: CoreMetrics.Timer
    /// From a download's admission to its file in place.
    package let duration: CoreMetrics.Timer

    private let factory: any MetricsFactory
    private let failedByCode = Mutex<[String: Counter]>([:])
    private let restartedByReason = Mutex<[String: Counter]>([:])
    /// Whether a backend records anything: the journal counts behind the queue gauges are read
    /// only then.
    package let isRecording: Bool

    package init(factory: (any MetricsFactory)?) {
        let factory = factory ?? MetricsSystem.factory
        self.factory = factory
        isRecording = !(factory is NOOPMetricsHandler)
        started = Counter(label: "haul_downloads_started_total", factory: factory)
        completed = Counter(label: "haul_downloads_completed_total", factory: factory)
        retries = Counter(label: "haul_download_retries_total", factory: factory)
        bytesReceived = Counter(label: "haul_received_bytes_total", factory: factory)
        bytesResent = Counter(label: "haul_resent_bytes_total", factory: factory)
        running = Gauge(label: "haul_downloads_running", factory: factory)
        queued = Gauge(label: "haul_downloads_queued", factory: factory)
        waitingToRetry = Gauge(label: "haul_downloads_waiting_to_retry", factory: factory)
        writeBuffersInUse = Gauge(label: "haul_write_buffers_in_use", factory: factory)
        partialFilesOpen = Gauge(label: "haul_partial_files_open", factory: factory)
        openDescriptors = Gauge(label: "haul_open_descriptors", factory: factory)
        timeToFirstByte = CoreMetrics.Timer(
            label: "haul_time_to_first_byte_seconds",
            preferredDisplayUnit: .seconds,
            factory: factory
        )
        duration = CoreMetrics.Timer(
            label: "haul_download_duration_seconds",
            preferredDisplayUnit: .seconds,
            factory: factory
        )
    }

    /// Downloads that failed, by ``DownloadError/Code`` (`code`).
    package func failed(_ code: DownloadError.Code) -> Counter {
        let key = code.description
        return failedByCode.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: "haul_downloads_failed_total", dimensions: [("code", key)], factory: factory)
            counters[key] = counter
            return counter
        }
    }

    /// Restarts from zero, by ``RestartReason`` (`reason`).
    package func restarted(_ reason: RestartReason) -> Counter {
        let key = reason.metricLabel
        return restartedByReason.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(
                label: "haul_downloads_restarted_total",
                dimensions: [("reason", key)],
                factory: factory
            )
            counters[key] = counter
            return counter
        }
    }
}

extension RestartReason {
    /// The reason as a metric's dimension: its case's name.
    var metricLabel: String {
        switch self {
        case .rangeIgnored: "range_ignored"
        case .remoteChanged: "remote_changed"
        case .rangeMismatch: "range_mismatch"
        case .rangeNotSatisfiable: "range_not_satisfiable"
        case .noValidator: "no_validator"
        case .overlapMismatch: "overlap_mismatch"
        case .decodedBody: "decoded_body"
        }
    }
}
