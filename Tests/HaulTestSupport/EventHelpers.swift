import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulValues

extension DownloadEvents.AsyncIterator {
    /// The next event that satisfies `predicate`, or nil when the sequence ends first.
    @discardableResult
    mutating func next(where predicate: (DownloadEvent) -> Bool) async -> DownloadEvent? {
        while let event = await next() {
            if predicate(event) { return event }
        }
        return nil
    }

    /// Pauses `download` (whose events these are) and waits for its `.paused`: the progress it
    /// reported, or nil (recorded as an issue) when the events ended first.
    @discardableResult
    mutating func pause(_ download: Download) async -> DownloadProgress? {
        await download.pause()
        guard case .paused(let progress)? = await next(where: { if case .paused = $0 { true } else { false } }) else {
            Issue.record("no paused event")
            return nil
        }
        return progress
    }
}

extension Download {
    /// Pauses once `bytes` are received, resumes at once, and waits for the file: the bytes the
    /// pause reported, or nil (recorded as an issue) when no pause came.
    func pauseOnceAndFinish(after bytes: Int64) async throws -> (pausedAt: Int64, file: URL)? {
        var events = events.makeAsyncIterator()
        await events.next { if case .progress(let p) = $0 { p.bytesReceived >= bytes } else { false } }
        guard let progress = await events.pause(self) else { return nil }
        await resume()
        return (progress.bytesReceived, try await finished())
    }
}
