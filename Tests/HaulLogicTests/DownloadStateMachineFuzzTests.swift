import FoundationEssentials
import Glibc
import Testing

@testable import HaulTestSupport
@testable import HaulTransfer
@testable import HaulValues

/// Random inputs to the request machine (``DownloadStateMachine``), as AsyncHTTPClient's
/// `HTTPConnectionPool+StateFuzzTests` drives its pool: the transfer's part played as it plays it
/// (the loop's inputs only in the states the loop sends them in; the user's and the other
/// connections' at any moment), and after every step the machine's rules checked: every action
/// leaves the state it names, `done` is final, the counts stay within their limits, one connection
/// stays one, and a move returns to the URL the partial came from.
@Suite("The request machine, random inputs")
struct DownloadStateMachineFuzzTests {
    typealias Machine = DownloadStateMachine
    static let url = "http://a.example/file"
    static let urls = [
        URL(string: "http://a.example/file")!, URL(string: "http://b.example/file")!,
        URL(string: "http://c.example/file")!,
    ]

    /// Failures of every kind the machine tells apart: transient or not, another URL may fix, a
    /// fresh URL may fix, the disk full.
    static let errors: [HaulValues.DownloadError] = [
        HaulValues.DownloadError(code: .transport, url: url, curlCode: 7),
        HaulValues.DownloadError(code: .transport, url: url, curlCode: 56),
        HaulValues.DownloadError(code: .transport, url: url, curlCode: 23),
        HaulValues.DownloadError(code: .httpStatus, url: url, httpStatus: 503),
        HaulValues.DownloadError(code: .httpStatus, url: url, httpStatus: 404),
        HaulValues.DownloadError(code: .httpStatus, url: url, httpStatus: 403),
        HaulValues.DownloadError(code: .fileSystem, url: url, errno: ENOSPC),
        HaulValues.DownloadError(code: .fileSystem, url: url, errno: EACCES),
        HaulValues.DownloadError(code: .checksumMismatch, url: url),
    ]
    static let decisions: [ResponseDecision] = [
        .append(total: 100), .append(total: nil), .replace(total: 100, reason: .remoteChanged),
        .replace(total: nil, reason: .rangeIgnored), .alreadyComplete(total: 100), .notModified(total: 100),
        .retryFromZero(reason: .rangeMismatch), .retryFromZero(reason: .overlapMismatch), .fail(status: 416),
        .invalid("no status line"), .unproven("an error page"), .askAgain(.date),
        .rejectURL(HaulValues.DownloadError(code: .httpStatus, url: url, httpStatus: 404)),
    ]

    @Test("5,000 random steps keep the machine's rules", arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func randomSteps(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var machine = Self.fresh(using: &random)
        var ended = 0
        for step in 0..<5_000 {
            let before = machine
            let description = Self.step(&machine, using: &random)
            if let broken = Self.brokenRule(before: before, after: machine, step: description) {
                Issue.record("seed \(seed), step \(step), \(description): \(broken)")
                return
            }
            // A paused or ended download leaves the loop; a new machine runs the next attempt.
            switch machine.state {
            case .paused, .done:
                if Int.random(in: 0..<4, using: &random) == 0 {
                    ended += 1
                    machine = Self.fresh(using: &random)
                }
            default: break
            }
        }
        #expect(ended > 50, "seed \(seed): the walks reach their ends (\(ended))")
    }

    /// A machine as admission makes one: some with mirrors, a refresh hook, retries left or not.
    static func fresh(using random: inout SeededRandom) -> Machine {
        Machine(
            url: url,
            failures: Int.random(in: 0...2, using: &random),
            restarts: Int.random(in: 0...Machine.maximumRestarts, using: &random),
            retryLimit: Int.random(in: 0...3, using: &random),
            alternatives: Int.random(in: 0...2, using: &random),
            refreshesURLs: Bool.random(using: &random),
            connectionRetryLimit: Bool.random(using: &random) ? nil : 0,
            answered: Bool.random(using: &random)
        )
    }

    /// One input the transfer could give in the machine's state; what it was, for a failure's message.
    static func step(_ machine: inout Machine, using random: inout SeededRandom) -> String {
        let error = errors.randomElement(using: &random)!
        switch Int.random(in: 0..<16, using: &random) {
        case 0: return "pause → \(machine.pause())"
        case 1: return "cancel → \(machine.cancel())"
        case 2: return "fail → \(machine.fail(error))"
        case 3:
            machine.bodyFailed(error)
            return "bodyFailed"
        case 4:
            return "fileChanged → \(machine.fileChanged(Bool.random(using: &random) ? .rangeIgnored : .remoteChanged))"
        case 5: return "urlRefused → \(machine.urlRefused(error))"
        case 6:
            let to = urls.randomElement(using: &random)!
            machine.moved(to: to.absoluteString, from: urls[0], after: error, counted: Bool.random(using: &random))
            return "moved to \(to)"
        case 7:
            let decision = decisions.randomElement(using: &random)!
            let vetted = machine.vet(decision, partialHasBytes: Bool.random(using: &random), partialIsThisURLs: false)
            return "vet \(decision): " + (vetted.dropped == nil ? "kept" : "dropped")
        case 8:
            _ = machine.versionsDiffered()
            return "versionsDiffered"
        case 9:
            let timing = machine.answerAccepted(
                rowInMemory: Bool.random(using: &random),
                segmented: Bool.random(using: &random),
                bytesOnDisk: Int64.random(in: 0...1, using: &random)
            )
            return "answerAccepted → \(timing)"
        case 10:
            _ = machine.rowWritten()
            return "rowWritten"
        default: return loopStep(&machine, error: error, using: &random)
        }
    }

    /// What the loop sends only in the states it sends it in.
    static func loopStep(_ machine: inout Machine, error: HaulValues.DownloadError, using random: inout SeededRandom)
        -> String
    {
        switch machine.state {
        case .idle, .waitingToRetry:
            return "admit → \(machine.admit(needsHeaders: Bool.random(using: &random)))"
        case .awaitingHeaders:
            return Bool.random(using: &random)
                ? "headersArrived → \(machine.headersArrived())" : "urlRefused → \(machine.urlRefused(error))"
        case .awaitingFreshURL:
            return Bool.random(using: &random)
                ? "freshURLArrived → \(machine.freshURLArrived())" : "urlRefused → \(machine.urlRefused(error))"
        case .connecting:
            switch Int.random(in: 0..<5, using: &random) {
            case 0: return "transferEnded(failed) → \(machine.transferEnded(.failed(error)))"
            case 1: return "foundComplete → \(machine.foundComplete())"
            default:
                let decision = decisions.randomElement(using: &random)!
                return "responseReceived(\(decision)) → \(machine.responseReceived(decision))"
            }
        case .receiving:
            let result: Machine.TransferResult = [.received, .rangeEnded, .failed(error)].randomElement(using: &random)!
            return
                "transferEnded(\(result)) → \(machine.transferEnded(result, progressed: Bool.random(using: &random)))"
        case .closing:
            return "transferEnded → \(machine.transferEnded(.received, progressed: Bool.random(using: &random)))"
        case .finishing:
            if Bool.random(using: &random) {
                machine.placed()
                return "placed"
            }
            return "completionFailed → \(machine.completionFailed(error))"
        case .paused, .done:
            return "cancelHandOver → \(machine.cancelHandOver())"
        }
    }

    /// The first rule `after` breaks, given the machine `before` the step, or `nil`.
    static func brokenRule(before: Machine, after: Machine, step: String) -> String? {
        if case .done = before.state, after.state != before.state { return "done is final, now \(after.state)" }
        if after.restarts > Machine.maximumRestarts { return "\(after.restarts) restarts" }
        if after.failures > max(after.retryLimit, before.failures) { return "\(after.failures) failures" }
        if after.alternativesTried < 0 || after.alternativesTried > max(after.alternatives, before.alternativesTried) {
            return "\(after.alternativesTried) of \(after.alternatives) alternatives tried"
        }
        if before.overOneConnection, !after.overOneConnection { return "back to several connections" }
        if after.versionConflicts < before.versionConflicts { return "version conflicts forgotten" }
        if let move = before.move, after.move == nil {
            // Only an answer that would replace the partial's bytes drops a move, back to its URL.
            guard step.hasPrefix("vet"), step.hasSuffix("dropped") else { return "a move forgotten" }
            if after.url != move.from.redactedString { return "a dropped URL's download not back at \(move.from)" }
        }
        if before.move == nil, after.move != nil, !step.hasPrefix("moved") { return "a move out of nothing" }
        return actionBroken(after: after, step: step)
    }

    /// An action names the state it leaves: the one the machine is in after it.
    static func actionBroken(after: Machine, step: String) -> String? {
        let rules: [(String, (Machine.State) -> Bool)] = [
            ("→ startRequest", { $0 == .connecting }),
            ("→ tryNextURL", { $0 == .connecting }),
            ("→ retry(", { $0 == .waitingToRetry }),
            ("→ pause", { $0 == .paused }),
            ("→ cancel", { $0 == .done(.cancelled) }),
            ("→ received", { $0 == .finishing }),
            ("→ keepDestination", { $0 == .finishing }),
            ("→ askForHeaders", { $0 == .awaitingHeaders }),
            ("→ accept(", { $0 == .receiving }),
            ("→ reject", { if case .closing = $0 { true } else { false } }),
            ("→ fail(", { if case .done(.failed) = $0 { true } else { false } }),
            ("→ refreshURL(", { if case .awaitingFreshURL = $0 { true } else { false } }),
        ]
        for (action, holds) in rules where step.contains(action) && !holds(after.state) {
            return "\(action) left \(after.state)"
        }
        if step == "placed", after.state != .done(.completed) { return "placed left \(after.state)" }
        return nil
    }
}
