import FoundationEssentials
import HaulValues
import Synchronization

/// One download managed by a ``DownloadManager``: its events, its controls, and its result.
///
/// ```swift
/// let download = try manager.download(from: url, to: destination)
/// Task {
///     for await event in download.events {
///         if case .progress(let progress) = event { print(progress.bytesReceived) }
///     }
/// }
/// let file = try await download.finished()
/// ```
///
/// Every method may be called from any thread or task. Commands are carried out on the manager's
/// loop thread; their effect shows in ``events`` and ``state``.
public final class Download: Sendable, Identifiable {
    /// Stable across runs: the same URL and destination always have the same id.
    public let id: DownloadID
    /// Where the file comes from: the URL requests go to now. That is the URL it was last asked for
    /// from (a download asked for again from another URL continues with it from its next request),
    /// or the mirror or fresh URL it moved to (``DownloadEvent/switchedURL(_:after:)``).
    public var url: URL { currentURL.withLock { $0 } }
    private let currentURL: Mutex<URL>
    /// Where the finished file goes. For a download that takes its file name from the server
    /// (``DownloadRequest/takesFileNameFromServer``), its folder until the first response named the
    /// file (before its first byte is written), then the file.
    public var destination: URL {
        let path = destinationPath
        // A discarded body's or a body in memory's, made once (a URL from a path costs microseconds).
        let nowhere = DownloadRequest.nowhere
        return path == nowhere.path ? nowhere.url : URL(fileURLWithPath: path, isDirectory: false)
    }
    /// Where the partial file and the record of this download live; `nil` for a body into a stream,
    /// memory or nothing, whose record this manager keeps in memory (no other process can continue
    /// it) and which has no partial file.
    public var stateDirectory: URL? {
        stateDirectoryPath == Journal.inMemoryKey ? nil : URL(fileURLWithPath: stateDirectoryPath, isDirectory: true)
    }
    /// Paths rather than URLs: thousands of live downloads each kept two file URLs (~350 bytes each).
    package var destinationPath: String { currentDestination.withLock { $0 } }
    private let currentDestination: Mutex<String>
    package let stateDirectoryPath: String

    package let hub: EventHub
    private let controller: any DownloadController

    private let census: Census
    /// Body bytes received for it in this process (``bytesReceivedInThisProcess``).
    package let receivedBytes = Atomic<Int64>(0)
    /// It was complete at its destination when asked for (``wasAlreadyComplete``).
    package let foundComplete = Atomic<Bool>(false)
    /// When its requests went and its bytes came (``timings``).
    package let ledger = Mutex(TimingLedger())
    /// ``response``, its URL with credentials until asked for.
    private let lastResponse = Mutex<DownloadResponse?>(nil)

    package init(
        id: DownloadID,
        url: URL,
        destinationPath: String,
        stateDirectoryPath: String,
        controller: any DownloadController,
        census: Census,
        progress: DownloadProgress,
        feed: EventFeed? = nil,
        keepsEarlyEvents: Bool = true
    ) {
        census.downloads.add(1, ordering: .relaxed)
        self.census = census
        self.id = id
        self.currentURL = Mutex(url)
        self.currentDestination = Mutex(destinationPath)
        self.stateDirectoryPath = stateDirectoryPath
        self.controller = controller
        self.hub = EventHub(
            progress: progress,
            earlyWindow: keepsEarlyEvents ? EventHub.earlyWindow : 0,
            feed: feed.map { ($0, id, destinationPath) }
        )
        hub.owner = self
    }

    deinit { census.downloads.subtract(1, ordering: .relaxed) }

    /// The file name the server gave was chosen: the file goes to `path`.
    package func update(destinationPath path: String) {
        currentDestination.withLock { $0 = path }
    }

    /// The download is asked for from `url` now.
    package func update(url: URL) {
        currentURL.withLock { $0 = url }
    }

    /// The download's events: its current state first (for the first iteration, soon after the
    /// download was created: every event since), then every change, ending after the final event.
    /// Each iteration is independent; see ``DownloadEvents``.
    public var events: DownloadEvents { DownloadEvents(hub: hub) }

    /// The current state.
    public var state: DownloadState { hub.snapshot.state }

    /// The latest progress.
    public var progress: DownloadProgress { hub.snapshot.progress }

    /// Body bytes this process received from the network for this download, while this handle
    /// lived: what the run cost, unlike ``progress`` (the bytes on disk, most of which an earlier
    /// run may have fetched). Bytes received twice (a restart from zero, an unvalidated resume's
    /// overlap) count twice.
    public var bytesReceivedInThisProcess: Int64 { receivedBytes.load(ordering: .relaxed) }

    /// Whether the destination held the complete file when the download was asked for, so that it
    /// completed without a request.
    public var wasAlreadyComplete: Bool { foundComplete.load(ordering: .relaxed) }

    /// What the download cost in this process: its time to first byte, its total time, its bytes,
    /// requests and connections (complete once it ended; see ``DownloadTimings``).
    public var timings: DownloadTimings {
        ledger.withLock { $0 }.timings(bytes: bytesReceivedInThisProcess)
    }

    /// What the server said of the file (final URL after redirects, `Content-Type`, validators,
    /// length) in the last response whose body this download accepted in this process; `nil` before
    /// one (and for a file that was complete already).
    public var response: DownloadResponse? {
        guard var shown = lastResponse.withLock({ $0 }) else { return nil }
        shown.url = URL(string: shown.url.redactedString) ?? shown.url
        return shown
    }

    /// ``response`` of a download that completed with a body: there is one (a body is accepted
    /// only from a response, recorded first). Were there none, the URL alone and status 0, "not
    /// known", rather than an invented answer.
    package var acceptedResponse: DownloadResponse {
        response ?? DownloadResponse(url: URL(string: url.redactedString) ?? url, status: 0)
    }

    /// Keeps what a response said (its URL's credentials are removed when read).
    package func record(_ response: DownloadResponse) {
        lastResponse.withLock { $0 = response }
    }

    /// Pauses: the connection is released and the bytes written so far are kept. No effect on a
    /// download that is paused or finished. Returns at once (from a synchronous context); in an
    /// asynchronous one, `await download.pause()` returns once it holds (the async form).
    public func pause() {
        controller.submit(.pause, for: self)
    }

    /// Pauses, and returns once the download is paused, with the bytes it kept synced to disk and
    /// recorded in its row (``state`` read right after is `.paused`), or once it ended meanwhile.
    ///
    /// - Returns: the state it is in then: `.paused`; a final state (it completed, failed or was
    ///   cancelled first); or, when the pause changed nothing (the row is another process's, which
    ///   runs it), the state it was in.
    @discardableResult
    public func pause() async -> DownloadState {
        await settle(.pause)
    }

    /// Resumes a paused download from the bytes on disk (it waits for a free slot first). No effect
    /// unless paused. Returns at once (from a synchronous context); the async form returns once it
    /// is queued again.
    public func resume() {
        controller.submit(.resume, for: self)
    }

    /// Resumes a paused download, and returns once it is queued again (or runs): ``state`` read
    /// right after is no longer `.paused`, unless the resume changed nothing (it was not paused).
    ///
    /// - Returns: the state it is in then.
    @discardableResult
    public func resume() async -> DownloadState {
        await settle(.resume)
    }

    /// Sets this download's own bandwidth limit in bytes per second (`nil`: the manager's default
    /// per download), at once if it runs, and in its journal row for later attempts.
    public func setMaxBytesPerSecond(_ rate: Int64?) {
        controller.submit(.limitRate(rate), for: self)
    }

    /// Cancels: the transfer stops and the partial file is deleted; its journal row says
    /// ``QueueState/cancelled`` (asking for it again starts anew). No effect on a finished download.
    /// Returns at once (from a synchronous context); the async form returns once it is cancelled.
    public func cancel() {
        controller.submit(.cancel, for: self)
    }

    /// Cancels, and returns once the download ended: `.cancelled`, its partial file deleted and its
    /// row saying cancelled; or the final state it reached first (completed, failed).
    ///
    /// - Returns: the state it is in then (the state it was in, when the cancel changed nothing: the
    ///   row is another process's).
    @discardableResult
    public func cancel() async -> DownloadState {
        await settle(.cancel)
    }

    /// Sends `control` without waiting (what the synchronous forms do), from any context.
    func submit(_ control: DownloadControl) {
        controller.submit(control, for: self)
    }

    /// Sends `control` and waits for the loop's answer (exactly one).
    private func settle(_ control: DownloadControl) async -> DownloadState {
        await withCheckedContinuation { continuation in
            controller.settle(control, for: self) { continuation.resume(returning: $0) }
        }
    }

    /// Waits for the end of the download. It returns once the journal records how it ended: a
    /// listing read then, or a process started then, finds it completed, failed or cancelled.
    ///
    /// - Returns: the destination, which holds the whole file.
    /// - Throws: the ``DownloadError`` it failed with (code `.cancelled` when cancelled, `.shutdown` when
    ///   the manager shut down first), or `CancellationError` when the waiting task is cancelled:
    ///   the download itself goes on, since other tasks may wait for it too (pause or cancel it for
    ///   that, or use ``DownloadManager/fetch(_:)``, whose cancellation pauses it).
    public func finished() async throws -> URL {
        try await hub.result()
    }
}
