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
        /// The file was complete at its destination before this run: nothing was requested.
        var alreadyComplete = false
        var progress = DownloadProgress(bytesReceived: 0, totalBytes: nil)
        var status = "queued"
    }

    private struct State {
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
    private let state = Mutex(State())
    private let started = DispatchTime.now().uptimeNanoseconds

    /// Redraws the bars when the terminal's size changes. Set once in `init`, then only read.
    nonisolated(unsafe) private let resized: DispatchSourceSignal?

    init(mode: Mode) {
        self.mode = mode
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
    var failureStatus: Int32 {
        state.withLock { ExitStatus.of(failures: $0.failureStatuses) }
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
                let already = state.withLock { $0.rows[index]?.alreadyComplete ?? false }
                // The URL the file came from: a mirror's, after a switch (not the dead first one).
                let source = download.map { Self.shown($0.url.absoluteString) } ?? url
                Self.write(
                    "\(already ? "already complete" : "completed") \(source) -> \(file.path)\n",
                    to: STDOUT_FILENO
                )
            case .failed(let error):
                Self.write("haul: \(error.forCommandLine)\n", to: STDERR_FILENO)
            case .restarted(let reason):
                Self.write("restarted \(url): \(Self.explain(reason))\n", to: STDOUT_FILENO)
            case .warning(let warning):
                Self.write("warning \(url): \(Self.explain(warning))\n", to: STDOUT_FILENO)
            case .switchedURL(let next, let error):
                Self.write("switched \(url) -> \(next.absoluteString): \(error.cause)\n", to: STDOUT_FILENO)
            case .retrying(let error, let delay):
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
    func finish(interrupted: Bool) {
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
                interrupted: interrupted
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
        if interrupted { summary += "; interrupted: run the same command again to resume" }
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

    // MARK: bars

    private func bars(_ event: DownloadEvent, index: Int, url: String, path: String) {
        var message: String?
        state.withLock { state in
            guard var row = state.rows[index] else { return }
            switch event {
            case .queued: row.status = "queued"
            case .connecting(let progress): row.status = "connecting"; row.progress = progress
            case .receiving(let progress), .progress(let progress): row.status = ""; row.progress = progress
            case .paused(let progress): row.status = "paused"; row.progress = progress
            case .restarted(let reason): message = "↻ \(row.name): \(Self.explain(reason))"
            case .warning(let warning): message = "! \(row.name): \(Self.explain(warning))"
            case .switchedURL(let next, let error):
                message = "⇄ \(row.name): \(error.cause); now from \(next.absoluteString)"
            case .retrying(let error, let delay):
                row.status = "retry in \(Self.delay(delay))"
                message = "↻ \(row.name): \(error.cause); retrying in \(Self.delay(delay))"
            case .completed(let file):
                let size = Self.completedSize(row.progress, file: file)
                if row.alreadyComplete {
                    state.alreadyComplete += 1
                    message = "✓ \(row.name): already complete at \(file.path) (\(Self.size(size)))"
                } else {
                    state.completed += 1
                    message = "✓ \(row.name) → \(file.path) (\(Self.size(size)))"
                }
                state.rows[index] = nil
                state.order.removeAll { $0 == index }
                return
            case .failed(let error):
                state.failed += 1
                message = "✗ \(error.forCommandLine)"
                state.rows[index] = nil
                state.order.removeAll { $0 == index }
                return
            case .cancelled:
                state.rows[index] = nil
                state.order.removeAll { $0 == index }
                return
            }
            state.rows[index] = row
        }
        redraw(force: message != nil, message: message)
    }

    /// Draws the bars again (at most every 100 ms unless `force`), after `message` if there is one.
    ///
    /// Every bar fits in one row of the terminal's current width, so the cursor knows how far up the
    /// last frame started; the frame is erased to the end of the screen before the message and the
    /// new bars are written, so a message of any length (it may wrap) leaves no piece of a bar behind.
    private func redraw(force: Bool, message: String? = nil) {
        // Written under the lock: two frames written in another order than they were made would
        // leave the second's cursor arithmetic wrong.
        state.withLock { state in
            let now = DispatchTime.now().uptimeNanoseconds
            guard force || now - state.lastDraw >= 100_000_000 else { return }
            state.lastDraw = now
            let width = Self.terminalWidth()
            // The last frame's rows: more than its lines when a narrower terminal rewrapped them.
            let rows = state.drawnColumns.reduce(0) { $0 + max(1, ($1 + width - 1) / max(1, width)) }
            // Each row of the last frame is erased on its own, not with one "erase below" from its
            // top: at the screen's top-left corner that moves the whole screen into the scrollback
            // (tmux), which would keep every frame there.
            var text = ""
            if rows > 0 {
                text += "\u{1B}[\(rows)A" + String(repeating: "\r\u{1B}[2K\u{1B}[1B", count: rows) + "\u{1B}[\(rows)A"
            }
            text += "\r"
            if let message { text += "\u{1B}[2K" + message + "\n" }
            var drawn: [Int] = []
            func add(_ line: String) {
                text += "\r\u{1B}[2K" + line + "\n"
                drawn.append(Text.columns(of: line))
            }
            let shown = state.order.prefix(12)
            for index in shown {
                guard let row = state.rows[index] else { continue }
                add(Self.bar(for: row, width: width))
            }
            let more = state.order.count - shown.count + state.waiting
            if more > 0 { add(Text.truncated("… and \(more) more", toColumns: width - 1)) }
            // Whatever a terminal that rewrapped the last frame left below the new one.
            if message != nil || !drawn.isEmpty { text += "\u{1B}[J" }
            state.drawnColumns = drawn
            Self.write(text, to: STDOUT_FILENO)
        }
    }

    /// One download's bar, in at most `width - 1` columns (a line as wide as the terminal would wrap
    /// on some terminals): the details go first (ETA, then speed), then the bar shrinks, then the name.
    static func bar(for row: Row, width: Int) -> String {
        let limit = max(1, width - 1)
        let progress = row.progress
        var details = ["\(size(progress.bytesReceived))" + (progress.totalBytes.map { "/\(size($0))" } ?? "")]
        if !row.status.isEmpty {
            details.append(row.status)
        } else {
            details.append("\(size(Int64(progress.bytesPerSecond)))/s")
            if let eta = progress.estimatedTimeRemaining { details.append("ETA \(duration(eta))") }
            // A file split over several connections says how many fetch it now.
            if progress.connections > 1 { details.append("\(progress.connections) conn") }
        }
        let percent = progress.fractionCompleted.map { Format.rightAligned(Int($0 * 100), width: 3) + "%" } ?? "  ?%"
        let nameColumns = Text.columns(of: row.name)
        // Room for a name of 8 columns (or the whole name, if shorter) and a bar of 10.
        let wanted = min(8, nameColumns) + 1 + 4 + 1 + 10 + 1
        while details.count > 1, wanted + Text.columns(of: details.joined(separator: " ")) > limit {
            details.removeLast()
        }
        let right = details.joined(separator: " ")
        let available = limit - (1 + 4 + 1 + Text.columns(of: right))  // for the name, the bar and a space
        let nameWidth = max(0, min(24, min(max(nameColumns, 8), max(available - 11, min(8, available)))))
        var barWidth = min(40, available - nameWidth - 1)
        if barWidth < 5 { barWidth = 0 }
        var name =
            nameColumns > nameWidth
            ? Text.truncated(row.name, toColumns: max(0, nameWidth - 1)) + (nameWidth > 0 ? "…" : "") : row.name
        name += String(repeating: " ", count: max(0, nameWidth - Text.columns(of: name)))  // aligned
        var line = "\(name) \(percent) "
        if barWidth > 0 {
            let filled = Int((progress.fractionCompleted ?? 0) * Double(barWidth))
            line += String(repeating: "█", count: filled) + String(repeating: "░", count: barWidth - filled) + " "
        }
        return Text.truncated(line + right, toColumns: limit)
    }

    /// A finished file's size: from its last progress, else (it finished before its events were
    /// read) from the file system.
    static func completedSize(_ progress: DownloadProgress?, file: URL) -> Int64 {
        if let progress, let total = progress.totalBytes, progress.bytesReceived == total { return total }
        var status = stat()
        return stat(file.path, &status) == 0 ? Int64(status.st_size) : progress?.bytesReceived ?? 0
    }

    // MARK: formatting

    static func size(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : "\(Format.tenths(value)) \(units[unit])"
    }

    static func duration(_ duration: Duration) -> String {
        let seconds = Int(duration.components.seconds)
        if seconds >= 3600 { return "\(seconds / 3600)h\(Format.zeroPadded(seconds % 3600 / 60, width: 2))m" }
        if seconds >= 60 { return "\(seconds / 60)m\(Format.zeroPadded(seconds % 60, width: 2))s" }
        return "\(seconds)s"
    }

    /// Why a download started over, with what the user can do about it.
    static func explain(_ reason: RestartReason) -> String {
        switch reason {
        case .noValidator:
            "\(reason); started over (--resume-unvalidated would continue it after checking its last bytes)"
        default: "\(reason); started over"
        }
    }

    /// A warning, with what the user can do about it.
    static func explain(_ warning: DownloadWarning) -> String {
        switch warning {
        case .unrequestedContentEncoding:
            "\(warning) (--compressed asks for such bodies and decodes them)"
        case .urlDropped: "\(warning)"
        case .versionsDiffer: "\(warning) (-x 1 asks for one connection from the start)"
        case .insecureRedirect: "\(warning); --checksum proves the file whatever the way"
        }
    }

    /// `url` as haul prints it: without a user name or password (`http://user:secret@h/x` →
    /// `http://h/x`), which must never reach the terminal, a log or `--json`.
    static func shown(_ url: String) -> String {
        let trimmed = url.trimmingSpaces
        // Credentials sit in the authority, before an "@": without one there is nothing to remove
        // (and no URL to parse, which was most of a rerun's cost over 100,000 finished URLs).
        // (Read by byte: ":", "/", "?", "#" and "@" are ASCII.)
        let bytes = trimmed.utf8
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[colon...].starts(with: "://".utf8) else {
            return trimmed
        }
        let authorityStart = bytes.index(colon, offsetBy: 3)
        let authority = bytes[authorityStart...].prefix {
            $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#")
        }
        guard let at = authority.lastIndex(of: UInt8(ascii: "@")) else { return trimmed }
        guard var components = URLComponents(string: trimmed) else {
            // Not parseable: drop anything between the scheme and the "@" all the same.
            return String(trimmed[..<authorityStart]) + String(trimmed[bytes.index(after: at)...])
        }
        guard components.user != nil || components.password != nil else { return trimmed }
        components.user = nil
        components.password = nil
        return components.string ?? trimmed
    }

    /// A retry's delay: tenths under ten seconds.
    static func delay(_ duration: Duration) -> String {
        let seconds = Self.seconds(duration)
        return seconds < 10 ? "\(Format.tenths(seconds))s" : Self.duration(duration)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Set once, before anything is written, when the body goes to standard output (`-o -`):
    /// everything haul says goes to standard error then, as curl's progress does.
    nonisolated(unsafe) static var bodyOnStandardOutput = false

    static func write(_ text: String, to descriptor: Int32) {
        // nonisolated(unsafe) above: written once by `run()` before any reporter or task exists.
        let descriptor = descriptor == STDOUT_FILENO && bodyOnStandardOutput ? STDERR_FILENO : descriptor
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                offset += written
            }
        }
    }

    private static func terminalWidth() -> Int {
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }
}
