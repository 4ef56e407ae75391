import Foundation
import Glibc

/// One fault server for the whole test process, and a view of it per test (issue 75, item 2), as
/// for nginx (``NginxServer+Shared.swift``): a view's URLs start with a folder of its own
/// (`/t-…/drop/N/SIZE`), which the server takes out before it routes; what depends on earlier
/// requests (the first request to a path, `/stall-segments/`'s silence, `/mixed/`'s history) and
/// the gate are per view, and so are ``FaultServer/allRequests`` and ``FaultServer/requests(to:)``.
/// A view's ``FaultServer/stop()`` closes the connections asked of it and opens its gate.
extension FaultServer {
    /// A view of the shared server, started by the first test that asks and stopped as the process
    /// exits, before the leak check (``Watchdog``), which finds any view not stopped.
    static func shared() -> FaultServer {
        FaultServer(viewOf: sharedServer)
    }

    private static let sharedServer: FaultServer = {
        // The server can only fail to start where every test of it would fail too.
        let server = try! FaultServer.start(watched: false)
        // Registered after the watchdog's: exit handlers run last-registered first.
        _ = Watchdog.shared
        atexit { FaultServer.sharedServer.stop() }
        return server
    }()

    /// Shuts down the connections asked of the view `namespace`, and lets its held answers go on.
    func closeConnections(of namespace: String) {
        lock.withLock {
            for (connection, view) in connections where view == namespace {
                shutdown(connection, Int32(SHUT_RDWR))
            }
        }
        openGate(namespace)
    }
}
