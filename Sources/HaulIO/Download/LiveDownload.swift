import FoundationEssentials
import HaulValues
import Synchronization

/// One download as the manager keeps it while it lives, shared by the loop (which publishes to it)
/// and the caller's handle (the facade's `Download`, which reads it and sends it controls): its
/// events, its counters, its timings, its URL and destination. The loop holds it while the download
/// runs, the handle while a caller holds that; the catalog, weakly, to find it by id.
package final class LiveDownload: Sendable {
    /// Stable across runs: the same URL and destination always have the same id.
    package let id: DownloadID
    /// Where the file comes from: the URL requests go to now. That is the URL it was last asked for
    /// from (a download asked for again from another URL continues with it from its next request),
    /// or the mirror or fresh URL it moved to (``DownloadEvent/switchedURL(_:after:)``).
    package var url: URL { currentURL.withLock { $0 } }
    private let currentURL: Mutex<URL>
    /// Where the finished file goes. For a download that takes its file name from the server
    /// (``DownloadRequest/takesFileNameFromServer``), its folder until the first response named the
    /// file (before its first byte is written), then the file.
    package var destination: URL {
        let path = destinationPath
        // A discarded body's or a body in memory's, made once (a URL from a path costs microseconds).
        let nowhere = RequestRules.nowhere
        return path == nowhere.path ? nowhere.url : URL(fileURLWithPath: path, isDirectory: false)
    }
    /// Where the partial file and the record of this download live; `nil` for a body into a stream,
    /// memory or nothing, whose record this manager keeps in memory (no other process can continue
    /// it) and which has no partial file.
    package var stateDirectory: URL? {
        stateDirectoryPath == Journal.inMemoryKey ? nil : URL(fileURLWithPath: stateDirectoryPath, isDirectory: true)
    }
    /// Paths rather than URLs: thousands of live downloads each kept two file URLs (~350 bytes each).
    package var destinationPath: String { currentDestination.withLock { $0 } }
    private let currentDestination: Mutex<String>
    package let stateDirectoryPath: String

    package let hub: EventHub
    private let controller: any DownloadController

    private let census: Census
    /// Body bytes received for it in this process (the handle's `bytesReceivedInThisProcess`).
    package let receivedBytes = Atomic<Int64>(0)
    /// It was complete at its destination when asked for (the handle's `wasAlreadyComplete`).
    package let foundComplete = Atomic<Bool>(false)
    /// When its requests went and its bytes came (``timings``, the handle's).
    package let ledger = Mutex(TimingLedger())
    /// ``response``, its URL with credentials until asked for.
    private let lastResponse = Mutex<ResponseRecord?>(nil)

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

    /// The caller's handle made for this download, while one lives (weak: the handle owns this).
    /// Looked at and set under one lock, so that two threads asking at once get one handle.
    private let caller = Mutex(CallerHandle())

    /// The caller's handle: the one that lives, else the one `make` makes, kept for the next to ask.
    package func handle<Handle: AnyObject>(make: () -> Handle) -> Handle {
        caller.withLock { caller in
            if let handle = caller.object as? Handle { return handle }
            let handle = make()
            caller.object = handle
            return handle
        }
    }

    /// Whether a caller holds a handle of this download now.
    package var hasCallerHandle: Bool { caller.withLock { $0.object != nil } }

    /// The current state.
    package var state: DownloadState { hub.snapshot.state }

    /// The latest progress.
    package var progress: DownloadProgress { hub.snapshot.progress }

    /// What the last accepted response said, its URL's credentials removed.
    package var response: ResponseRecord? {
        guard var shown = lastResponse.withLock({ $0 }) else { return nil }
        shown.url = URL(string: shown.url.redactedString) ?? shown.url
        return shown
    }

    /// ``response`` of a download that completed with a body: there is one (a body is accepted
    /// only from a response, recorded first). Were there none, the URL alone and status 0, "not
    /// known", rather than an invented answer.
    package var acceptedResponse: ResponseRecord {
        response ?? ResponseRecord(url: URL(string: url.redactedString) ?? url, status: 0)
    }

    /// Keeps what a response said (its URL's credentials are removed when read).
    package func record(_ response: ResponseRecord) {
        lastResponse.withLock { $0 = response }
    }

    /// Sends `control` without waiting (what the synchronous forms do), from any context.
    package func submit(_ control: DownloadControl) {
        controller.submit(control, for: self)
    }

    /// Sends `control` and waits for the loop's answer (exactly one).
    package func settle(_ control: DownloadControl) async -> DownloadState {
        await withCheckedContinuation { continuation in
            controller.settle(control, for: self) { continuation.resume(returning: $0) }
        }
    }

    /// Waits for the end of the download, once the journal records it (see the facade's
    /// `Download.finished()`).
    package func finished() async throws -> URL {
        try await hub.result()
    }
}

/// A weak reference to the caller's handle, kept under ``LiveDownload``'s lock.
private struct CallerHandle {
    weak var object: AnyObject?
}
