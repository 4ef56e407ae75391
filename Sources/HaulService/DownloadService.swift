import FoundationEssentials
import Haul
import ServiceLifecycle
import Synchronization

/// A ``Haul/DownloadManager`` as a swift-service-lifecycle `Service`, to run in a `ServiceGroup`
/// beside an HTTP server.
///
/// Making it starts nothing: ``run()`` starts the manager (its loop thread, its journal) and lives
/// until the group's graceful shutdown, then shuts the manager down (every transfer paused, what is
/// buffered written, every download's bytes recorded) and returns; the next process's service
/// continues the unfinished downloads. Callers reach the running manager with ``manager()``, which
/// waits for ``run()`` to start it.
///
/// ```swift
/// let downloads = DownloadService(configuration: configuration)
/// let group = ServiceGroup(services: [downloads, server], gracefulShutdownSignals: [.sigterm], logger: logger)
/// // in a request handler:
/// let file = try await downloads.manager().fetch(url, to: destination)
/// ```
///
/// `withDownloadManager` gives the same life to a manager in a closure, for programs that are not
/// services.
public final class DownloadService: Service, Sendable {
    /// What ``run()`` starts its manager with.
    public let configuration: DownloadManager.Configuration

    private typealias Waiter = CheckedContinuation<DownloadManager, any Error>
    private enum State {
        /// Not started: the tasks waiting for the manager, by number.
        case idle(waiters: [Int: Waiter], next: Int)
        case running(DownloadManager)
        case ended
    }
    private let state = Mutex(State.idle(waiters: [:], next: 0))

    /// A service that will run a manager with `configuration`; nothing starts until ``run()``.
    public init(configuration: DownloadManager.Configuration = DownloadManager.Configuration()) {
        self.configuration = configuration
    }

    /// The running manager; waits until ``run()`` has started it.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled; ``Haul/DownloadError`` with
    ///   code `.shutdown` once the service has ended (or the error its manager failed to start with).
    public func manager() async throws -> DownloadManager {
        let number = Mutex<Int?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: Waiter) in
                let ready = state.withLock { state -> Result<DownloadManager, any Error>? in
                    switch state {
                    case .running(let manager): return .success(manager)
                    case .ended: return .failure(Self.ended)
                    case .idle(var waiters, let next):
                        if Task.isCancelled { return .failure(CancellationError()) }
                        waiters[next] = continuation
                        state = .idle(waiters: waiters, next: next + 1)
                        number.withLock { $0 = next }
                        return nil
                    }
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            // A waiter still waiting leaves with CancellationError; one already resumed is gone.
            let waiter = state.withLock { state -> Waiter? in
                guard case .idle(var waiters, let next) = state, let key = number.withLock({ $0 }),
                    let waiter = waiters.removeValue(forKey: key)
                else { return nil }
                state = .idle(waiters: waiters, next: next)
                return waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Starts the manager, serves until the group's graceful shutdown (or this task's cancellation),
    /// then shuts the manager down and returns.
    ///
    /// - Throws: what ``Haul/DownloadManager/init(configuration:)`` throws (a journal another
    ///   process holds, a damaged journal).
    public func run() async throws {
        let manager: DownloadManager
        do {
            manager = try DownloadManager(configuration: configuration)
        } catch {
            end(with: error)
            throw error
        }
        let waiters = state.withLock { state -> [Waiter] in
            guard case .idle(let waiters, _) = state else { return [] }
            state = .running(manager)
            return Array(waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: manager) }
        // Until the graceful shutdown; a cancelled task (the group cancelling) ends the wait too.
        try? await gracefulShutdown()
        state.withLock { $0 = .ended }
        await manager.shutdown()
    }

    private func end(with error: any Error) {
        let waiters = state.withLock { state -> [Waiter] in
            defer { state = .ended }
            guard case .idle(let waiters, _) = state else { return [] }
            return Array(waiters.values)
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    private static let ended = DownloadError(code: .shutdown, url: nil, detail: "the download service has ended")
}
