import Foundation
import Haul
import HaulService
import Hummingbird
import Logging
import Metrics
import Prometheus
import ServiceLifecycle

/// A download service: `POST /downloads?url=URL&name=NAME` downloads URL to NAME in the service's
/// folder (202 and the download's id), `GET /downloads/ID` says where it stands, `GET /metrics` is
/// the Prometheus text of every metric (Haul's among them). SIGTERM or SIGINT shuts it down
/// gracefully: transfers pause with their bytes kept, and the next start continues them.
///
/// Environment: `HAUL_SERVICE_PORT` (default 8080), `HAUL_SERVICE_FOLDER` (default ./downloads).
@main
struct HaulServiceExample {
    static func main() async throws {
        let environment = ProcessInfo.processInfo.environment
        let port = environment["HAUL_SERVICE_PORT"].flatMap(Int.init) ?? 8080
        let folder = URL(fileURLWithPath: environment["HAUL_SERVICE_FOLDER"] ?? "downloads", isDirectory: true)
        var logger = Logger(label: "haul-service")
        logger.logLevel = .info

        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = folder.appendingPathComponent(".haul", isDirectory: true)
        configuration.maxConcurrentDownloads = 8
        configuration.logger = logger
        let downloads = DownloadService(configuration: configuration)

        let router = Router()
        router.post("downloads") { request, _ -> Response in
            guard let text = request.uri.queryParameters.get("url"), let url = URL(string: text),
                let name = request.uri.queryParameters.get("name"), Self.isPlainName(name)
            else {
                return Self.json(.badRequest, ["error": "give url= and name= (a file name, no folder)"])
            }
            do {
                let download = try await downloads.manager().download(
                    from: url,
                    to: folder.appendingPathComponent(name, isDirectory: false)
                )
                return Self.json(.accepted, ["id": download.id.rawValue])
            } catch let error as DownloadError {
                return Self.json(.badRequest, ["error": error.description])
            }
        }
        router.get("downloads/:id") { _, context -> Response in
            guard let raw = context.parameters.get("id") else { return Self.json(.badRequest, ["error": "no id"]) }
            let id = DownloadID(rawValue: raw)
            let manager = try await downloads.manager()
            if let download = manager.download(id: id) {
                return Self.json(.ok, ["id": raw, "state": Self.name(of: download.state)])
            }
            guard let entry = manager.journalEntry(id: id) else { return Self.json(.notFound, ["id": raw]) }
            return Self.json(.ok, ["id": raw, "state": "\(entry.state)"])
        }
        router.get("metrics") { _, _ -> String in
            registry.emitToString()
        }

        let server = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: port)),
            logger: logger
        )
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: downloads), .init(service: server)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        try await group.run()
    }

    /// A file name in the folder: no path, not hidden.
    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && !name.contains("/") && !name.hasPrefix(".") && name.utf8.count <= 255
    }

    static func name(of state: DownloadState) -> String {
        switch state {
        case .queued: "queued"
        case .waitingToRetry: "waitingToRetry"
        case .connecting: "connecting"
        case .receiving: "receiving"
        case .paused: "paused"
        case .completed: "completed"
        case .failed: "failed"
        case .cancelled: "cancelled"
        }
    }

    static func json(_ status: HTTPResponse.Status, _ fields: [String: String]) -> Response {
        let body = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body))
        )
    }
}
