import Dispatch
import FoundationEssentials
import Glibc
import Haul
import Synchronization

/// The progress bars on a terminal: drawn, redrawn on resize, cleared before a message.
extension Reporter {
    // MARK: bars

    func bars(_ event: DownloadEvent, index: Int, url: String, path: String) {
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
            case .waitingToRetry(let error, let delay):
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
    func redraw(force: Bool, message: String? = nil) {
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
}
