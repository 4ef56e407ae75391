import Foundation
import Testing

@testable import HaulCLI
@testable import HaulTestSupport

/// `haul load --report FILE.html` (issue 60): the page is one file that fetches nothing, holds the
/// run's figures, and draws its plots: checked in headless Chromium's screenshot.
extension HaulCLITests {
    @Test("haul load --report: one self-contained page with the figures, and a screenshot in Chromium shows every plot")
    func loadReportPage() async throws {
        Watchdog.shared.expects(.seconds(90), because: "Chromium renders the page and its screenshot: 20-30 s")
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("load.bin", size: 32 * 1024, seed: 64)
        let file = server.url("load.bin").absoluteString
        let missing = server.url("missing.bin").absoluteString
        let page = work.appendingPathComponent("report.html")
        // The open model over a second and a half (-n: each of the 150 runs to its end), half the
        // downloads a 404: every plot has something.
        let run = try await haul(
            ["load", "--rate", "100", "-n", "150", "-c", "10", "--report", page.path, file, missing],
            in: work
        )
        #expect(run.status == 0, "\(run.stderr)")
        let html = try String(contentsOf: page, encoding: .utf8)
        #expect(html.hasPrefix("<!doctype html>") && html.hasSuffix("</html>\n"))
        #expect(html.contains("150 downloads of 2 URLs, 100 started per second, at most 10 at once"))
        #expect(html.contains("<tr><td>Failed</td><td><span class=\"failed\">75</span></td></tr>"), "\(html)")
        #expect(html.contains("<td>From schedule (latency)</td>") && html.contains("<tr><td>404</td><td>75</td></tr>"))
        #expect(html.components(separatedBy: "<svg ").count - 1 == 8)
        // The errors in their words, with the server's host and port.
        #expect(html.contains("<td>127.0.0.1:\(server.port): the server answered HTTP 404"), "\(html)")
        // Self-contained: no script, style sheet, image or frame to fetch; the only addresses are
        // SVG's namespace and the URLs loaded.
        for fetching in ["<script", "<link", "<img", "<iframe", "<object", "src=", "href=", "url(", "@import"] {
            #expect(!html.contains(fetching), "\(fetching)")
        }
        let addresses =
            html
            .replacingOccurrences(of: "xmlns=\"http://www.w3.org/2000/svg\"", with: "")
            .replacingOccurrences(of: file, with: "").replacingOccurrences(of: missing, with: "")
        #expect(!addresses.contains("http:") && !addresses.contains("https:"))

        // The page in headless Chromium, and its screenshot read back pixel by pixel.
        let screenshot = work.appendingPathComponent("report.png")
        let chromium = try await HaulBinary.run(
            program: "/usr/bin/chromium",
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                "--user-data-dir=\(work.appendingPathComponent("chromium").path)",
                "--window-size=1000,3300", "--screenshot=\(screenshot.path)", page.absoluteString,
            ],
            in: work
        )
        #expect(chromium.status == 0, "\(chromium.stderr)")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/png-colours.py")
        // Each plot's colour, top to bottom as the page draws them.
        let plots = [
            ("distribution", LoadPage.Colour.distribution), ("total by percentile", LoadPage.Colour.total),
            ("started per second", LoadPage.Colour.started), ("completed per second", LoadPage.Colour.completed),
            ("p99 of each second", LoadPage.Colour.secondP99), ("received per second", LoadPage.Colour.received),
            ("in flight", LoadPage.Colour.inFlight), ("failed per second", LoadPage.Colour.errors),
        ]
        let read = try await HaulBinary.run(
            program: "/usr/bin/python3",
            [
                script.path, screenshot.path, LoadPage.Colour.firstByte, LoadPage.Colour.latency,
                LoadPage.Colour.secondP50,
            ]
                + plots.map(\.1),
            in: work
        )
        #expect(read.status == 0, "\(read.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(read.stdout.utf8)) as? [String: Any]
        let colours = try #require(json?["colours"] as? [String: [String: Any]], "\(read.stdout)")
        func drawn(_ colour: String) -> (pixels: Int, box: [Int]) {
            (colours[colour]?["pixels"] as? Int ?? 0, colours[colour]?["box"] as? [Int] ?? [0, 0, 0, 0])
        }
        // Every series is on the screen: bars fill areas, lines and their dots some hundreds of pixels.
        let lines = [
            ("first byte", LoadPage.Colour.firstByte), ("latency", LoadPage.Colour.latency),
            ("p50 of each second", LoadPage.Colour.secondP50),
        ]
        for (name, colour) in plots + lines {
            let (pixels, box) = drawn(colour)
            #expect(pixels >= 150, "\(name) (\(colour)): \(pixels) pixels")
            // Across the plot, not a dot or a legend's square alone.
            #expect(box[2] - box[0] >= 300, "\(name) (\(colour)) spans \(box)")
        }
        // One plot below the other, in the page's order (each box's lowest pixel).
        let bottoms = plots.map { drawn($0.1).box[3] }
        #expect(bottoms == bottoms.sorted() && Set(bottoms).count == bottoms.count, "\(bottoms)")
    }

    @Test("haul load with a URL password and a token header: neither in the report, the JSON, the page or a file")
    func loadKeepsSecrets() async throws {
        let (server, work) = try await startServerAndDirectory(
            own: "its URL is written by hand, with a password, from the port"
        )
        defer { stop(server, work) }
        let source = try server.makeFile("l.bin", size: 5_000, seed: 68)
        let token = "tok-load-SECRET-6801"
        let url = "http://alice:\(NginxServer.password)@127.0.0.1:\(server.port)/private/l.bin"
        let page = work.appendingPathComponent("secrets.html")
        let folder = work.appendingPathComponent("bodies")
        let runs = [
            try await haul(["load", "-n", "4", "-c", "2", "-H", "X-Api-Token: \(token)", "--json", url], in: work),
            try await haul(
                [
                    "load", "-n", "4", "-c", "2", "-H", "X-Api-Token: \(token)", "--report", page.path, "-o",
                    folder.path, url,
                ],
                in: work
            ),
        ]
        for run in runs { #expect(run.status == 0, "\(run.stderr)") }
        // The password was sent: every download passed nginx's basic auth.
        #expect(runs[0].stdout.contains("\"completed\":4"), "\(runs[0].stdout)")
        #expect(try Data(contentsOf: folder.appendingPathComponent("3-l.bin")) == source)
        let html = try String(contentsOf: page, encoding: .utf8)
        #expect(html.contains("4 downloads of http://127.0.0.1:\(server.port)/private/l.bin"), "\(html.prefix(600))")
        for secret in [NginxServer.password, token] {
            expectNowhere(secret, under: work, or: runs.flatMap { [$0.stdout, $0.stderr] } + [html])
        }
    }
}
