import Foundation
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 40, item 3: one public state per meaning, derived from the events in one function.
@Suite("A download's public state")
struct DownloadStateTests {
    static let error = DownloadError(code: .transport, url: "http://h/f", curlCode: 7)
    static let file = URL(fileURLWithPath: "/tmp/f")
    static let progress = DownloadProgress(bytesReceived: 10, totalBytes: 100)
    static let states: [DownloadState] = [
        .queued, .connecting, .receiving, .paused, .waitingToRetry(error, after: .seconds(2)), .completed(file),
        .failed(error), .cancelled,
    ]

    @Test("each event leads to its state from any state; progress, restarts, warnings and switches keep it")
    func afterEachEvent() {
        let table: [(DownloadEvent, DownloadState?)] = [
            (.queued, .queued), (.connecting(Self.progress), .connecting), (.receiving(Self.progress), .receiving),
            (.waitingToRetry(Self.error, after: .seconds(2)), .waitingToRetry(Self.error, after: .seconds(2))),
            (.paused(Self.progress), .paused), (.completed(Self.file), .completed(Self.file)),
            (.failed(Self.error), .failed(Self.error)), (.cancelled, .cancelled),
            (.progress(Self.progress), nil), (.restarted(.rangeIgnored), nil), (.warning(.versionsDiffer), nil),
            (.switchedURL(Self.file, after: Self.error), nil),
        ]
        for state in Self.states {
            for (event, expected) in table {
                #expect(state.after(event) == (expected ?? state), "\(state) after \(event)")
            }
        }
    }

    @Test("a new subscriber is shown each state by the event that leads to it; final states are final")
    func replay() {
        for state in Self.states {
            let event = DownloadEvent(state.engine.event(progress: Self.progress.engine))
            #expect(DownloadState.queued.after(event) == state, "\(state) shown as \(event)")
            #expect(state.isFinal == event.isFinal && state.engine.isFinal == event.isFinal)
        }
        #expect(Self.states.filter(\.isFinal).count == 3)
    }

    @Test("the public states, events, warnings and reasons are the layers' below, case for case, words included")
    func publicNamesMatchTheLayersBelow() {
        let reasons: [RestartReason] = [
            .rangeIgnored, .remoteChanged, .rangeMismatch, .rangeNotSatisfiable, .noValidator, .overlapMismatch,
            .decodedBody,
        ]
        let warnings: [DownloadWarning] =
            [.unrequestedContentEncoding("gzip"), .versionsDiffer, .insecureRedirect(Self.file)]
            + reasons.flatMap { [.urlDropped(Self.file, reason: $0), .repeatedBytesReadPast(7, reason: $0)] }
        let events: [DownloadEvent] =
            [
                .queued, .connecting(Self.progress), .receiving(Self.progress), .progress(Self.progress),
                .waitingToRetry(Self.error, after: .seconds(2)), .switchedURL(Self.file, after: Self.error),
                .paused(Self.progress), .completed(Self.file), .failed(Self.error), .cancelled,
            ] + reasons.map { .restarted($0) } + warnings.map { .warning($0) }
        for reason in reasons {
            #expect(RestartReason(reason.engine) == reason && reason.description == reason.engine.description)
        }
        for warning in warnings {
            #expect(DownloadWarning(warning.engine) == warning && warning.description == warning.engine.description)
        }
        for event in events {
            #expect(DownloadEvent(event.engine) == event && event.description == event.engine.description)
            #expect(event.isFinal == event.engine.isFinal)
        }
        for state in Self.states {
            #expect(DownloadState(state.engine) == state && state.description == state.engine.description)
        }
        #expect(Set(events.map(\.description)).count == events.count)
        for state in QueueState.allCases {
            #expect(QueueState(state.engine) == state && state.description == state.engine.description)
            #expect(state.isUnfinished == state.engine.isUnfinished)
        }
        #expect(QueueState.allCases.count == HaulIO.QueueState.allCases.count)
        let progress = DownloadProgress(
            bytesReceived: 3 << 20,
            totalBytes: 8 << 20,
            bytesPerSecond: 1_048_576,
            estimatedTimeRemaining: .seconds(5),
            connections: 2
        )
        #expect(DownloadProgress(progress.engine) == progress && progress.fractionCompleted == 0.375)
        #expect(progress.description == "3.0 MiB of 8.0 MiB, 1.0 MiB/s, 5 s left, 2 connections")
        let id = DownloadID(destination: URL(fileURLWithPath: "/tmp/x/../f"))
        #expect(DownloadID(id.engine) == id && id.engine == HaulValues.DownloadID(destination: Self.file))
        let digest = String(repeating: "ab", count: 32)
        #expect(Checksum("SHA256:" + digest.uppercased())?.description == "sha256:" + digest)
        #expect(
            Checksum(algorithm: .md5, hex: "zz") == nil && Checksum.Algorithm.allCases.map(\.hexLength) == [64, 40, 32]
        )
        let header = DownloadHeader("X-Api-Key", "k")
        #expect(header.isSensitive && DownloadHeader(header.engine) == header && "\(header)" == "X-Api-Key: <redacted>")
        let limits = RateLimits(perDownload: 0, perHost: nil, total: 5)
        #expect(limits.normalized == RateLimits(perDownload: 1, perHost: nil, total: 5))
    }

    @Test("one word per meaning: the journal's and the fleet's words are the public state's")
    func words() {
        #expect(QueueState.queued.description == "queued" && QueueState.waitingToRetry.description == "waitingToRetry")
        #expect(QueueState.paused.description == "paused" && QueueState.completed.description == "completed")
        #expect(QueueState.failed.description == "failed")
    }
}
