import Foundation
import Haul
import Logging
import ServiceLifecycle

// What the samples take as given: the names a reader's own code has around a sample (a manager, a
// download, a URL, a token…). The samples are compiled, never run: none of these is ever read.

private func given<T>() -> T { fatalError("the samples are compiled, not run") }

var manager: DownloadManager { given() }
var download: Download { given() }
var configuration: DownloadManager.Configuration {
    get { given() }
    set {}
}
var url: URL { given() }
var urls: [URL] { given() }
var destination: URL { given() }
var exportURL: URL { given() }
var token: String { given() }
var session: String { given() }
var logger: Logger { given() }

/// A service's own token source.
struct Tokens: Sendable {
    func current(for url: URL) async throws -> String { given() }
}
var tokens: Tokens { given() }

/// A service's object storage, which signs URLs that expire.
struct Storage: Sendable {
    func presign(_ name: String) async throws -> URL { given() }
    func presignedURL(for name: String) async throws -> URL { given() }
}
var storage: Storage { given() }

/// A service's HTTP server, run beside the downloads in one `ServiceGroup`.
struct HTTPServer: Service {
    func run() async throws {}
}
var httpServer: HTTPServer { given() }
