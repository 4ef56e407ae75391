import Foundation
import Glibc
import Haul
import Testing

@testable import HaulCLI
@testable import HaulTestSupport

/// `haul`'s live bars in a real terminal: tmux at 40, 80 and 200 columns, with several downloads, a
/// retry and a failure (issue 17, item 2). Every frame is read back with `capture-pane -J` (rows a
/// line wrapped onto are joined to it), so a bar that wrapped shows as a line wider than the pane.
@Suite("haul in a terminal", .timeLimit(.minutes(2)))
struct HaulTerminalTests {
    /// A tmux server of this test's own (`-L`), without the user's configuration.
    struct Tmux {
        let socket = "haul-test-\(UUID().uuidString.prefix(8))"
        let scratch: URL

        @discardableResult
        func run(_ arguments: [String]) async throws -> String {
            let out = scratch.appendingPathComponent("tmux-\(UUID().uuidString)").path
            defer { unlink(out) }
            let process = try ChildProcess("/usr/bin/tmux", ["-L", socket, "-f", "/dev/null"] + arguments, stdout: out)
            let status = await process.exited()
            guard status == 0 else { throw TestFailure("tmux \(arguments.first ?? "") exited with \(status)") }
            return (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        }

        /// The pane's visible screen (or, with `history`, everything since it started), wrapped rows
        /// joined to their line.
        func screen(history: Bool = false) async throws -> [String] {
            try await run(["capture-pane", "-p", "-J", "-t", "haul"] + (history ? ["-S", "-"] : []))
                .split(separator: "\n").map(String.init)
        }

        func stop() async { _ = try? await run(["kill-server"]) }
    }

    /// Lines that are bars (they draw one).
    static func bars(_ screen: [String]) -> [String] { screen.filter { $0.contains("░") || $0.contains("█") } }

    /// Runs haul on three files, one that is retried once and one that fails, in a `width`-column
    /// pane (resized to `resizeTo` once bars show, if given); returns every frame read, the last
    /// screen, everything the pane showed since it started, and haul's exit status.
    ///
    /// The three files are held by the fault server's gate after their first MiB until the test has
    /// seen what it looks for: a frame with bars (and, with `resizeTo`, one drawn at the new width
    /// after the resize). Before: 16 KB/s tails, long enough on a quiet machine; on a loaded one the
    /// downloads once ended before a frame after the resize was read. The hold is at byte 1 MiB of
    /// each file (`/gate-at/`), so that a retry after haul's stall timeout is held there too: with
    /// the suite beside a CI run, two transfers once sat at 128 KiB for 30 s, were retried, and
    /// completed before any frame at the new width was read.
    func run(
        width: Int,
        resizeTo: Int? = nil
    ) async throws -> (frames: [[String]], last: [String], history: [String], exit: Int) {
        let (faults, work) = try startFaultServerAndDirectory()
        defer { stop(faults, work) }
        let tmux = Tmux(scratch: work)
        var urls: [String] = []
        for index in 0..<3 {
            // Routing reads the numbers; the last part is the file's name, long for a narrow pane.
            let name = "a-rather-long-file-name-number-\(index)-for-a-narrow-terminal.bin"
            urls.append(faults.url("gate-at/\(1024 * 1024)/\(1024 * 1024 + 96 * 1024)/\(name)").absoluteString)
        }
        urls.append(faults.url("busy/503/1/0/300000").absoluteString)
        urls.append(faults.url("status/404/missing.bin").absoluteString)
        let haul = HaulCLITests.haulPath
        let output = work.appendingPathComponent("out").path
        let command =
            ([haul, "-j", "5", "--retries", "2", "-o", output] + urls).map { "'\($0)'" }.joined(separator: " ")
            + "; echo HAUL-EXIT=$?; sleep 600"
        try await tmux.run(["new-session", "-d", "-s", "haul", "-x", "\(width)", "-y", "80", command])
        var frames: [[String]] = []
        var resized = resizeTo == nil
        // A backstop only: the gate holds the downloads as long as the test needs them.
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(60)
        var last: [String] = []
        // When the screen last changed: the resize waits for a still screen (see `settled`).
        var changed = clock.now
        defer { Task { await tmux.stop() } }
        while clock.now < deadline {
            let screen = try await tmux.screen()
            if screen != last { changed = clock.now }
            last = screen
            frames.append(last)
            if last.contains(where: { $0.hasPrefix("HAUL-EXIT=") }) { break }
            let bars = Self.bars(last)
            if !resized, let narrower = resizeTo, Self.settled(last, still: clock.now - changed) {
                try await tmux.run(["resize-window", "-t", "haul", "-x", "\(narrower)", "-y", "80"])
                resized = true
            } else if resized, !bars.isEmpty, bars.allSatisfy({ Text.columns(of: $0) < (resizeTo ?? width) }) {
                faults.openGate()  // seen: the downloads may end
            }
            try await Task.sleep(for: .milliseconds(30))
        }
        let history = try await tmux.screen(history: true)
        await tmux.stop()
        let exit = last.first { $0.hasPrefix("HAUL-EXIT=") }.flatMap { Int($0.dropFirst(10)) } ?? -1
        return (frames, last, history, exit)
    }

    /// Whether haul has nothing more to draw until the gate opens: three bars held, the other two
    /// downloads' lines printed, and the screen unchanged for longer than haul's progress interval
    /// (200 ms; haul draws only on an event, and a held download has none).
    ///
    /// A terminal resized while a frame is still on its way to it (written for the old width, read
    /// at the new one) is left with rows of the frame before, which no program can find again: the
    /// frame's own cursor movements counted rows at the old width. With the suite beside a CI run,
    /// tmux once read such a frame after its resize, and a piece of a 200-column bar stayed on the
    /// 40-column screen. That is the terminal's race, not haul's redraw, so the resize waits for a
    /// still screen.
    static func settled(_ screen: [String], still: Duration) -> Bool {
        bars(screen).count == 3 && screen.contains { $0.hasPrefix("✓ ") && $0.contains("300000") }
            && screen.contains { $0.hasPrefix("✗ ") } && still >= .milliseconds(400)
    }

    /// What the pane must show at the end: every message whole, the summary, and no piece of a bar.
    func checkFinalScreen(_ last: [String]) {
        #expect(Self.bars(last).isEmpty, "pieces of bars are left: \(Self.bars(last))")
        checkMessages(last)
    }

    func checkMessages(_ last: [String]) {
        #expect(last.filter { $0.hasPrefix("✓ ") }.count == 4, "\(last)")
        #expect(
            last.contains { $0.hasPrefix("↻ ") && $0.contains("HTTP 503") && $0.contains("retrying in") },
            "\(last)"
        )
        #expect(last.contains { $0.hasPrefix("✗ ") && $0.contains("missing.bin") && $0.contains("404") }, "\(last)")
        #expect(last.contains { $0.hasPrefix("4 completed, 1 failed, ") && $0.contains(" received in ") }, "\(last)")
    }

    @Test("bars fit the pane and messages leave no piece of a bar behind", arguments: [40, 80, 200])
    func barsFit(width: Int) async throws {
        let (frames, _, history, exit) = try await run(width: width)
        #expect(exit == 2)  // 404s: the HTTP error class
        let drawn = frames.flatMap(Self.bars)
        #expect(!drawn.isEmpty, "no frame showed a bar in \(frames.count) frames")
        for bar in drawn { #expect(Text.columns(of: bar) <= width - 1, "a bar wrapped at \(width): \(bar)") }
        // Everything the pane ever showed: no piece of a bar anywhere, every message whole.
        checkFinalScreen(history)
    }

    @Test("a terminal made narrower while haul runs (SIGWINCH) gets bars of its new width")
    func resized() async throws {
        let (frames, last, history, exit) = try await run(width: 200, resizeTo: 40)
        #expect(exit == 2)
        // After the resize, haul redraws at 40 columns: some frame shows bars that all fit.
        #expect(
            frames.contains { !Self.bars($0).isEmpty && Self.bars($0).allSatisfy { Text.columns(of: $0) <= 39 } },
            "no frame after the resize drew bars within 39 columns; the last frames' bars and widths: \(frames.suffix(3).map { Self.bars($0).map { "\(Text.columns(of: $0)): \($0)" } })"
        )
        // The screen is clean at the end. (Rows the terminal rewrapped and pushed into its history when
        // it shrank cannot be erased: only the visible screen is checked for pieces of bars.)
        #expect(Self.bars(last).isEmpty, "pieces of bars are left: \(Self.bars(last))")
        checkMessages(history)
    }

    @Test(
        "haul load on a terminal: a live line while it runs (done, in flight, rate, errors, p50, p99), erased before the report"
    )
    func loadLiveLine() async throws {
        let (faults, work) = try startFaultServerAndDirectory()
        defer { stop(faults, work) }
        let tmux = Tmux(scratch: work)
        // Taken in turn: a quick file, and one the gate holds after its first KiB until the test has
        // seen the live line with the four downloads in flight and some done.
        let quick = faults.url("file/4096/quick.bin").absoluteString
        let held = faults.url("gate/1024/4096/held.bin").absoluteString
        let command =
            [HaulCLITests.haulPath, "load", "-n", "40", "-c", "4", quick, held].map { "'\($0)'" }.joined(separator: " ")
            + "; echo HAUL-EXIT=$?; sleep 600"
        try await tmux.run(["new-session", "-d", "-s", "haul", "-x", "120", "-y", "60", command])
        defer { Task { await tmux.stop() } }
        var live: String?
        var last: [String] = []
        // A backstop only: the gate holds the downloads as long as the test needs them.
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(60)
        while clock.now < deadline {
            last = try await tmux.screen()
            if last.contains(where: { $0.hasPrefix("HAUL-EXIT=") }) { break }
            if live == nil,
                let line = last.first(where: { $0.contains(" done · 4 in flight · ") && $0.contains("p99") })
            {
                live = line
                faults.openGate()
            }
            try await Task.sleep(for: .milliseconds(30))
        }
        await tmux.stop()
        let line = try #require(live, "no live line with 4 in flight: \(last)")
        // "1.5 s · 2 done · 4 in flight · 0.0/s · 0 errors · p50 1.23 ms · p99 2.34 ms"
        let fields = line.components(separatedBy: " · ")
        #expect(fields.count == 7 && fields[0].hasSuffix(" s") && fields[4] == "0 errors", "\(line)")
        #expect(fields[1].hasSuffix(" done") && (Int(fields[1].dropLast(5)) ?? 0) >= 1, "\(line)")
        #expect(fields[5].hasPrefix("p50 ") && fields[6].hasPrefix("p99 "), "\(line)")
        #expect(last.contains("HAUL-EXIT=0"), "\(last)")
        #expect(last.contains("  Downloads:     40 (40 completed, 0 failed)"), "\(last)")
        // Erased: no piece of it is left on the screen above or inside the report.
        #expect(!last.contains { $0.contains(" in flight · ") }, "\(last)")
    }
}
