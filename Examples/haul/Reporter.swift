import Dispatch
import FoundationEssentials
import Glibc
import Haul
import Synchronization

/// How `haul` shows what happens: live bars on a terminal, a line per finished file otherwise,
/// JSON lines for scripts, or errors only.
final class Reporter: Sendable {
    enum Mode: Equatable {
        case bars
        case lines
        case json
        case quiet
    }

    struct Row {
        var name: String
        /// Where the download was to go, as its first event said (it may be placed at `name.1`).
        var path = ""
        /// The file was complete at its destination before this run: nothing was requested, or the
        /// server said the file there is current (a conditional request's 304).
        var alreadyComplete = false
        var progress = DownloadProgress(bytesReceived: 0, totalBytes: nil)
        var status = "queued"
    }

    struct State {
        var rows: [Int: Row] = [:]
        var order: [Int] = []
        /// The columns of each line of the last frame of bars.
        var drawnColumns: [Int] = []
        var lastDraw: UInt64 = 0
        /// Downloads completed by this run, and those found complete already.
        var completed = 0
        var alreadyComplete = 0
        var failed = 0
        /// Body bytes received by this run (not the sizes of the files: most of a resumed one may
        /// have come in an earlier run).
        var received: Int64 = 0
        /// Downloads of the command not started yet (see ``expect(_:)``).
        var waiting = 0
        /// The exit statuses of the failures seen (``ExitStatus``).
        var failureStatuses: Set<Int32> = []
    }

    let mode: Mode
    /// Whether another run continues what this one leaves (files do; a stream or a discarded body,
    /// which a run cannot take back or read again, starts over).
    let resumesInAnotherRun: Bool
    let state = Mutex(State())
    let started = DispatchTime.now().uptimeNanoseconds

    /// Redraws the bars when the terminal's size changes. Set once in `init`, then only read.
    nonisolated(unsafe) private let resized: DispatchSourceSignal?

    init(mode: Mode, resumesInAnotherRun: Bool = true) {
        self.mode = mode
        self.resumesInAnotherRun = resumesInAnotherRun
        if mode == .bars {
            signal(SIGWINCH, SIG_IGN)
            resized = DispatchSource.makeSignalSource(signal: SIGWINCH, queue: .global())
        } else {
            resized = nil
        }
        resized?.setEventHandler { [weak self] in self?.redraw(force: true) }
        resized?.resume()
    }

    /// Whether this mode shows more than each download's outcome (lines tell restarts and retries).
    var wantsEveryEvent: Bool { mode != .quiet }
    /// Whether a download's URL is shown: not with `--quiet`, where only an error is (and names its URL).
    var showsURLs: Bool { mode != .quiet }

    /// The number of downloads the command will start, shown as "more" until they start.
    func expect(_ count: Int) {
        state.withLock { $0.waiting = count }
    }

    /// An item of the command that asks again for a download an earlier one asked for: one of
    /// them is reported, and it is no longer waiting.
    func joined() {
        state.withLock { $0.waiting = max(0, $0.waiting - 1) }
    }

    /// A download of the command that could not be started (its error is printed already): failed,
    /// no longer waiting.
    func refused(_ error: any Error) {
        state.withLock {
            $0.waiting = max(0, $0.waiting - 1)
            $0.failed += 1
            $0.failureStatuses.insert((error as? DownloadError).map(ExitStatus.of) ?? ExitStatus.usage)
        }
    }

    /// The exit status of the failures seen: theirs when they agree, else 1 (``ExitStatus``).
    var failureStatus: Int32 { failureStatus(with: nil) }

    /// ``failureStatus`` with `another` failure's status among them (the list could not be queued).
    func failureStatus(with another: Int32?) -> Int32 {
        state.withLock { ExitStatus.of(failures: $0.failureStatuses.union(another.map { [$0] } ?? [])) }
    }

    /// What haul says when a download goes to `savedAs`, a `name.N` beside `asked`, because a file
    /// that is not this download's (as the server has it now) is at `asked`; `nil` for another path.
    static func numberedNote(asked: String, savedAs: String) -> String? {
        guard savedAs.hasPrefix(asked + "."), !savedAs.dropFirst(asked.count + 1).contains("/") else { return nil }
        return "'\(asked)' was there already and is not this download's file as the server has it now: saved "
            + "as '\(Paths.lastComponent(of: savedAs))'. Use -c to continue that file instead, or --force to "
            + "replace it."
    }

    /// Registers a download at its first event past `.queued`.
    private static func add(index: Int, name: String, alreadyComplete: Bool, to state: inout State) {
        state.rows[index] = Row(name: name, alreadyComplete: alreadyComplete)
        state.order.append(index)
        state.waiting = max(0, state.waiting - 1)
    }

    /// Shows one event of download `index`, named `name` until it ends: its row is made at its first
    /// event past `.queued` (a download waiting for a slot is one of the "more"). `download` is its
    /// handle (`nil` for one that could not start); `path` is absolute. Its final event (or the
    /// pause of an interrupted run) counts what it received.
    func report(
        _ event: DownloadEvent,
        index: Int,
        name: String,
        url: String,
        path: String,
        download: Download?
    ) {
        if event != .queued {
            let alreadyComplete = download?.wasAlreadyComplete ?? false
            state.withLock { state in
                if state.rows[index] == nil {
                    Self.add(index: index, name: name, alreadyComplete: alreadyComplete, to: &state)
                    state.rows[index]?.path = path
                } else if alreadyComplete, case .completed = event {
                    // Found current by the server (a revalidation's 304) after it was queued.
                    state.rows[index]?.alreadyComplete = true
                }
            }
        }
        switch event {
        case .completed, .failed, .cancelled, .paused: if let download { ended(download) }
        default: break
        }
        if case .failed(let error) = event { state.withLock { _ = $0.failureStatuses.insert(ExitStatus.of(error)) } }
        report(event, index: index, url: url, path: path, download: download)
    }

    /// Shows one event of download `index` (`download` is `nil` for one that could not start;
    /// `path` is absolute).
    func report(_ event: DownloadEvent, index: Int, url: String, path: String, download: Download? = nil) {
        switch mode {
        case .json:
            Self.write(JSONEvent.line(for: event, url: url, path: path, download: download), to: STDOUT_FILENO)
            count(event, index: index)
        case .quiet:
            if case .failed(let error) = event { Self.write("haul: \(error.forCommandLine)\n", to: STDERR_FILENO) }
            count(event, index: index)
        case .lines:
            switch event {
            case .completed(let file):
                let (already, asked) = state.withLock {
                    ($0.rows[index]?.alreadyComplete ?? false, $0.rows[index]?.path ?? path)
                }
                // The URL the file came from: a mirror's, after a switch (not the dead first one).
                let source = download.map { Self.shown($0.url.absoluteString) } ?? url
                Self.write(
                    "\(already ? "already complete" : "completed") \(source) -> \(file.path)\n",
                    to: STDOUT_FILENO
                )
                if let note = Self.numberedNote(asked: asked, savedAs: file.path) {
                    // Placed beside a file found at its name that is not this download's (put there
                    // meanwhile, or of a version the server no longer has, its state lost).
                    Self.write("haul: \(note)\n", to: STDERR_FILENO)
                }
            case .failed(let error):
                Self.write("haul: \(error.forCommandLine)\n", to: STDERR_FILENO)
            case .restarted(let reason):
                Self.write("restarted \(url): \(Self.explain(reason))\n", to: STDOUT_FILENO)
            case .warning(let warning):
                Self.write("warning \(url): \(Self.explain(warning))\n", to: STDOUT_FILENO)
            case .switchedURL(let next, let error):
                Self.write("switched \(url) -> \(next.absoluteString): \(error.cause)\n", to: STDOUT_FILENO)
            case .waitingToRetry(let error, let delay):
                Self.write("retrying \(url) in \(Self.delay(delay)): \(error.cause)\n", to: STDOUT_FILENO)
            default: break
            }
            count(event, index: index)
        case .bars:
            bars(event, index: index, url: url, path: path)
        }
    }

    /// A download of the command ended (or stopped, interrupted): what it received counts.
    func ended(_ download: Download) {
        let received = download.bytesReceivedInThisProcess
        state.withLock { $0.received += received }
    }

    /// The summary line at the end: files this run completed, files that were complete already,
    /// failures, and the bytes this run received.
    /// - Parameter timeLimit: `--max-time`'s seconds, when they stopped the run.
    func finish(interrupted: Bool, timeLimit: Double? = nil) {
        let (completed, already, failed, received) = state.withLock {
            ($0.completed, $0.alreadyComplete, $0.failed, $0.received)
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        switch mode {
        case .json:
            let summary = JSONEvent.Summary(
                completed: completed,
                alreadyComplete: already,
                failed: failed,
                received: received,
                seconds: seconds,
                interrupted: interrupted,
                timeLimitReached: timeLimit == nil ? nil : true
            )
            Self.write(JSONEvent.line(summary), to: STDOUT_FILENO)
            return
        case .quiet: return
        case .bars: redraw(force: true)
        case .lines: break
        }
        var summary = "\(completed + already) completed"
        if already > 0 { summary += " (\(already) already complete)" }
        summary += ", \(failed) failed, \(Self.size(received)) received in \(Format.tenths(seconds)) s"
        let again =
            resumesInAnotherRun
            ? "run the same command again to resume"
            : "a stream or a discarded body is not resumed by another run, which starts it over"
        if let timeLimit {
            summary += "; stopped at --max-time (\(Format.tenths(timeLimit)) s): \(again)"
        } else if interrupted {
            summary += "; interrupted: \(again)"
        }
        Self.write(summary + "\n", to: STDOUT_FILENO)
    }

    private func count(_ event: DownloadEvent, index: Int) {
        state.withLock { state in
            switch event {
            case .progress(let progress), .receiving(let progress):
                state.rows[index]?.progress = progress
            case .completed:
                if state.rows[index]?.alreadyComplete == true {
                    state.alreadyComplete += 1
                } else {
                    state.completed += 1
                }
                state.rows[index] = nil
            case .failed:
                state.failed += 1
                state.rows[index] = nil
            default: break
            }
        }
    }
}
