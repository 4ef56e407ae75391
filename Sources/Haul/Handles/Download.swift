import FoundationEssentials
import HaulIO
import HaulValues

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
    /// What the loop and this handle share (events, counters, timings): the manager's, which may
    /// outlive the handle (a download runs whether anyone holds it or not).
    package let live: LiveDownload

    private init(_ live: LiveDownload) { self.live = live }

    /// The handle of `live`: the one a caller holds, else a new one, which callers then share.
    package static func of(_ live: LiveDownload) -> Download { live.handle { Download(live) } }

    /// Stable across runs: the same URL and destination always have the same id.
    public var id: DownloadID { DownloadID(live.id) }
    /// Where the file comes from: the URL requests go to now. That is the URL it was last asked for
    /// from (a download asked for again from another URL continues with it from its next request),
    /// or the mirror or fresh URL it moved to (``DownloadEvent/switchedURL(_:after:)``).
    public var url: URL { live.url }
    /// Where the finished file goes. For a download that takes its file name from the server
    /// (``DownloadRequest/takesFileNameFromServer``), its folder until the first response named the
    /// file (before its first byte is written), then the file.
    public var destination: URL { live.destination }
    /// Where the partial file and the record of this download live; `nil` for a body into a stream,
    /// memory or nothing, whose record this manager keeps in memory (no other process can continue
    /// it) and which has no partial file.
    public var stateDirectory: URL? { live.stateDirectory }

    /// The download's events: its current state first (for the first iteration, soon after the
    /// download was created: every event since), then every change, ending after the final event.
    /// Each iteration is independent; see ``DownloadEvents``.
    public var events: DownloadEvents { DownloadEvents(hub: live.hub) }

    /// The current state.
    public var state: DownloadState { DownloadState(live.state) }

    /// The latest progress.
    public var progress: DownloadProgress { DownloadProgress(live.progress) }

    /// Body bytes this process received from the network for this download, while this handle
    /// lived: what the run cost, unlike ``progress`` (the bytes on disk, most of which an earlier
    /// run may have fetched). Bytes received twice (a restart from zero, an unvalidated resume's
    /// overlap) count twice.
    public var bytesReceivedInThisProcess: Int64 { live.receivedBytes.load(ordering: .relaxed) }

    /// Whether the destination held the complete file when the download was asked for, so that it
    /// completed without a request.
    public var wasAlreadyComplete: Bool { live.foundComplete.load(ordering: .relaxed) }

    /// What the download cost in this process: its time to first byte, its total time, its bytes,
    /// requests and connections (complete once it ended; see ``DownloadTimings``).
    public var timings: DownloadTimings {
        DownloadTimings(live.ledger.withLock { $0 }, bytes: bytesReceivedInThisProcess)
    }

    /// What the server said of the file (final URL after redirects, `Content-Type`, validators,
    /// length) in the last response whose body this download accepted in this process; `nil` before
    /// one (and for a file that was complete already).
    public var response: DownloadResponse? { live.response.map(DownloadResponse.init) }

    /// Pauses: the connection is released and the bytes written so far are kept. No effect on a
    /// download that is paused or finished. Returns at once (from a synchronous context); in an
    /// asynchronous one, `await download.pause()` returns once it holds (the async form).
    public func pause() {
        live.submit(.pause)
    }

    /// Pauses, and returns once the download is paused, with the bytes it kept synced to disk and
    /// recorded in its row (``state`` read right after is `.paused`), or once it ended meanwhile.
    ///
    /// - Returns: the state it is in then: `.paused`; a final state (it completed, failed or was
    ///   cancelled first); or, when the pause changed nothing (the row is another process's, which
    ///   runs it), the state it was in.
    @discardableResult
    public func pause() async -> DownloadState {
        DownloadState(await live.settle(.pause))
    }

    /// Resumes a paused download from the bytes on disk (it waits for a free slot first). No effect
    /// unless paused. Returns at once (from a synchronous context); the async form returns once it
    /// is queued again.
    public func resume() {
        live.submit(.resume)
    }

    /// Resumes a paused download, and returns once it is queued again (or runs): ``state`` read
    /// right after is no longer `.paused`, unless the resume changed nothing (it was not paused).
    ///
    /// - Returns: the state it is in then.
    @discardableResult
    public func resume() async -> DownloadState {
        DownloadState(await live.settle(.resume))
    }

    /// Sets this download's own bandwidth limit in bytes per second (`nil`: the manager's default
    /// per download), at once if it runs, and in its journal row for later attempts.
    public func setMaxBytesPerSecond(_ rate: Int64?) {
        live.submit(.limitRate(rate))
    }

    /// Cancels: the transfer stops and the partial file is deleted; its journal row says
    /// ``QueueState/cancelled`` (asking for it again starts anew). No effect on a finished download.
    /// Returns at once (from a synchronous context); the async form returns once it is cancelled.
    public func cancel() {
        live.submit(.cancel)
    }

    /// Cancels, and returns once the download ended: `.cancelled`, its partial file deleted and its
    /// row saying cancelled; or the final state it reached first (completed, failed).
    ///
    /// - Returns: the state it is in then (the state it was in, when the cancel changed nothing: the
    ///   row is another process's).
    @discardableResult
    public func cancel() async -> DownloadState {
        DownloadState(await live.settle(.cancel))
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
        try await withPublicErrors { try await live.finished() }
    }
}
