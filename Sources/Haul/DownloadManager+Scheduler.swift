import FoundationEssentials
import HaulIO
import HaulScheduler
import HaulTransfer
import HaulValues
import Logging
import Tracing

/// The facade turns its configuration into what the layers below it are given as values: the
/// scheduler's settings and hooks, and what every transfer shares. Nothing below the facade reads
/// ``DownloadManager/Configuration``.
extension SchedulerSettings {
    /// The settings of a manager configured with `configuration` whose descriptors allow `budget`.
    init(_ configuration: DownloadManager.Configuration, budget: DescriptorBudget) {
        let slots = min(configuration.maxConcurrentDownloads, budget.transfers)
        if slots < configuration.maxConcurrentDownloads {
            configuration.logger.info(
                "the open-files limit allows fewer downloads at once than configured",
                metadata: ["haul.configured": "\(configuration.maxConcurrentDownloads)", "haul.slots": "\(slots)"]
            )
        }
        var headerValues:
            (@Sendable (HaulValues.DownloadID, URL, URL, [String]) async throws -> [HaulValues.DownloadHeader])?
        if let provider = configuration.headerProvider {
            headerValues = { id, url, destination, names in
                try await provider(
                    DownloadManager.HeadersNeeded(id: DownloadID(id), url: url, destination: destination, names: names)
                ).engine
            }
        }
        var freshURL: (@Sendable (HaulValues.DownloadID, URL, URL, Int) async throws -> FreshURL?)?
        if let refresher = configuration.urlRefresher {
            freshURL = { id, url, destination, status in
                let expired = DownloadManager.ExpiredURL(
                    id: DownloadID(id),
                    url: url,
                    destination: destination,
                    status: status
                )
                return try await refresher(expired).map { ($0.url, $0.headers?.engine) }
            }
        }
        self.init(
            slots: slots,
            perHostLimit: configuration.maxConcurrentDownloadsPerHost,
            connectionLimit: budget.transfers,
            finishingLimit: MemoryBudget.finishingLimit(slots: slots, openPartialFiles: budget.openPartialFiles),
            streamsPerConnection: configuration.usesHTTP2 ? configuration.maxStreamsPerConnection : nil,
            checkpointInterval: configuration.checkpointInterval,
            stallTimeout: configuration.stallTimeout,
            keptDirectory: DownloadManager.configuredStateDirectory(configuration),
            logger: configuration.logger,
            headerValues: headerValues,
            freshURL: freshURL
        )
    }
}

extension TransferEnvironment {
    /// What the transfers of a manager configured with `configuration` share, `slots` of them at once
    /// on `reactor`.
    convenience init(
        _ configuration: DownloadManager.Configuration,
        slots: Int,
        budget: DescriptorBudget,
        reactor: Reactor,
        census: Census,
        unixSocketPath: String?
    ) {
        var options = EasyHandle.Options(
            maximumRedirects: configuration.maximumRedirects,
            userAgent: configuration.userAgent,
            connectTimeout: configuration.connectTimeout,
            stallTimeout: configuration.stallTimeout,
            certificateAuthorityFile: configuration.certificateAuthorityFile?.path,
            cookieFile: configuration.cookieFile?.path,
            decodesCompression: configuration.decodesCompression,
            usesHTTP2: configuration.usesHTTP2,
            proxy: configuration.proxy?.absoluteString ?? (configuration.ignoresProxyEnvironment ? "" : nil),
            noProxy: configuration.proxyBypass?.joined(separator: ",")
                ?? (configuration.ignoresProxyEnvironment ? "" : nil),
            headerLog: configuration.logsHeaders ? HeaderLog(logger: configuration.logger) : nil,
            // A reactor that parks sockets must hear of every close (its one setting decides both).
            socketCloser: reactor.parksSockets ? reactor : nil
        )
        options.unixSocketPath = unixSocketPath
        self.init(
            reactor: reactor,
            easyHandles: EasyHandlePool(
                options: options,
                receiveBufferSize: MemoryBudget.receiveBufferSize(slots: slots),
                keeping: max(64, slots)
            ),
            buffers: BufferPool(
                bufferSize: configuration.bufferSize,
                idleLimit: slots,
                limit: MemoryBudget.writeBufferLimit(bufferSize: configuration.bufferSize, slots: slots)
            ),
            openPartialFiles: OpenPartialFiles(limit: budget.openPartialFiles),
            census: census,
            logger: configuration.logger,
            progressInterval: configuration.progressInterval,
            maximumFileSize: configuration.maximumFileSize,
            retryLimit: configuration.retryLimit,
            retryPolicy: RetryPolicy(
                baseDelay: configuration.retryDelay,
                maximumDelay: configuration.maximumRetryDelay
            ),
            connectionRetryLimit: configuration.connectionRetryLimit,
            resumesWithoutValidator: configuration.resumesWithoutValidator,
            setsModificationTimeFromServer: configuration.setsModificationTimeFromServer,
            defaultHeaders: configuration.headers.engine,
            refreshesURLs: configuration.urlRefresher != nil,
            preallocatesFiles: configuration.preallocatesFiles,
            rateLimits: configuration.rateLimits.engine,
            connectionsPerFile: configuration.connectionsPerFile,
            minimumSegmentSize: configuration.minimumSegmentSize,
            metrics: HaulMetrics(factory: configuration.metricsFactory),
            tracer: configuration.tracer ?? InstrumentationSystem.tracer
        )
    }
}

extension DownloadManager {
    /// What happened to its reactor's parked socket watches (tests: kept-alive connections keep
    /// their watches between requests, and lose them when the socket is ready or closed).
    var parkedWatchCounts: (parked: Int, reclaimed: Int, disarmedWhenReady: Int, disarmedWhenClosed: Int) {
        reactor.parkedWatchCounts
    }
}
