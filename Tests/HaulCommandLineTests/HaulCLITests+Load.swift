import Foundation
import Testing

@testable import HaulTestSupport

/// `haul load` (issue 60): a closed-model run against nginx, its report as text and as JSON, and
/// the arguments it refuses.
extension HaulCLITests {
    @Test("haul load -n 40 -c 8 over a file and a missing one: 20 each, their statuses, bytes and times, as JSON")
    func loadReportsAsJSON() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let size = 64 * 1024
        _ = try server.makeFile("load.bin", size: size, seed: 60)
        let run = try await haul(
            [
                "load", "-n", "40", "-c", "8", "--json", server.url("load.bin").absoluteString,
                server.url("missing.bin").absoluteString,
            ],
            in: work
        )
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n")
        #expect(lines.count == 1, "one object: \(run.stdout)")
        let json = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
        let object = try #require(json)
        // The URLs in turn: 20 of each.
        #expect(object["requests"] as? Int == 40 && object["completed"] as? Int == 20 && object["failed"] as? Int == 20)
        #expect(object["statusCodes"] as? [String: Int] == ["200": 20, "404": 20])
        #expect(object["errors"] as? [String: Int] == ["httpStatus": 20])
        #expect(object["bytes"] as? Int == 20 * size)
        let opened = try #require(object["connectionsOpened"] as? Int)
        let reused = try #require(object["connectionsReused"] as? Int)
        #expect(opened >= 1 && opened <= 8 + 20 && opened + reused == 40, "\(opened) opened, \(reused) reused")
        let total = try #require(object["total"] as? [String: Double])
        let firstByte = try #require(object["timeToFirstByte"] as? [String: Double])
        #expect(Set(total.keys) == ["min", "mean", "p50", "p90", "p95", "p99", "p999", "max"])
        #expect(firstByte["p50"]! <= total["p50"]! && total["min"]! > 0 && total["max"]! >= total["p99"]!)
        #expect((object["seconds"] as? Double).map { $0 > 0 } == true)
    }

    @Test("haul load prints a summary, the percentiles, the phases and the statuses; -z runs for a time")
    func loadReportsAsText() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("load.bin", size: 4096, seed: 61)
        let run = try await haul(["load", "-n", "30", "-c", "3", server.url("load.bin").absoluteString], in: work)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("Downloads:     30 (30 completed, 0 failed)"), "\(run.stdout)")
        #expect(run.stdout.contains("\n  [200] 30\n") && !run.stdout.contains("Errors:"))
        #expect(run.stdout.contains("\n  first byte") && run.stdout.contains("\n  name lookup"))
        let timed = try await haul(
            ["load", "-z", "0.5", "-c", "2", "--json", server.url("load.bin").absoluteString],
            in: work
        )
        #expect(timed.status == 0, "\(timed.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(timed.stdout.utf8)) as? [String: Any]
        let object = try #require(json)
        let requests = try #require(object["requests"] as? Int)
        // At the run's end, what is in flight (at most the 2 of -c) is stopped and counted apart.
        let (completed, cancelled) = (object["completed"] as? Int ?? -1, object["cancelled"] as? Int ?? -1)
        #expect(requests >= 1 && completed >= 1 && cancelled <= 2 && completed + cancelled == requests, "\(object)")
        #expect(object["failed"] as? Int == 0)
    }

    @Test("haul load --rate 200 -z 1: exactly the 200 downloads the schedule holds, each with its latency from it")
    func loadOpenModel() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("load.bin", size: 4096, seed: 62)
        let url = server.url("load.bin").absoluteString
        let run = try await haul(["load", "--rate", "200", "-z", "1", "-c", "20", "--json", url], in: work)
        #expect(run.status == 0, "\(run.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
        let object = try #require(json)
        let requests = try #require(object["requests"] as? Int)
        // Counted on the schedule: exactly the 200 due within the second, however loaded the machine;
        // those not done at its end stopped then and counted apart. That is at most the 20 of -c
        // only when the machine keeps up: on a loaded one the schedule's later requests still wait
        // for a place behind the 20 and are stopped too (113 of 200 seen, the CLI suite running
        // alone). What -c bounds whatever the load is the connections.
        #expect(requests == 200, "\(requests) started for 200")
        let (completed, cancelled) = (object["completed"] as? Int ?? -1, object["cancelled"] as? Int ?? -1)
        #expect(completed >= 1 && cancelled >= 0 && completed + cancelled == requests, "\(object)")
        #expect((1...20).contains(object["connectionsOpened"] as? Int ?? 0), "\(object)")
        #expect(object["failed"] as? Int == 0)
        let latency = try #require(object["latency"] as? [String: Double])
        let total = try #require(object["total"] as? [String: Double])
        // From the schedule: never less than the download itself took.
        #expect(latency["max"]! >= total["min"]! && latency["min"]! > 0)
    }

    @Test("thresholds: each verdict on standard error, exit 99 when one fails, 0 when all hold")
    func loadThresholds() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("load.bin", size: 4096, seed: 63)
        let file = server.url("load.bin").absoluteString
        let missing = server.url("missing.bin").absoluteString
        let failing = try await haul(
            ["load", "-n", "10", "-c", "2", "--threshold", "errors<1%", "--threshold", "rps>0", file, missing],
            in: work
        )
        #expect(failing.status == 99, "\(failing.stderr)")
        #expect(failing.stderr.contains("haul: threshold FAILED: errors<1% (50.00 %)"), "\(failing.stderr)")
        #expect(failing.stderr.contains("haul: threshold passed: rps>0"), "\(failing.stderr)")
        let holding = try await haul(
            ["load", "-n", "10", "-c", "2", "--json", "--threshold", "errors<1%", "--threshold", "p99<60s", file],
            in: work
        )
        #expect(holding.status == 0, "\(holding.stderr)")
        #expect(holding.stdout.split(separator: "\n").count == 1)
        let refused = try await haul(["load", "--threshold", "p99<fast", file], in: work)
        #expect(refused.status == 64, "\(refused.stderr)")
    }

    @Test("haul load -i FILE takes the file's URLs in turn beside the arguments'; the text report draws a histogram")
    func loadInputFile() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("load.bin", size: 4096, seed: 64)
        let list = work.appendingPathComponent("list.txt")
        try
            "\(server.url("load.bin").absoluteString)\n  header=X-Load: 1\n# a comment\n\(server.url("missing.bin").absoluteString)\n"
            .write(to: list, atomically: true, encoding: .utf8)
        let run = try await haul(
            ["load", "-n", "30", "-c", "3", "-i", list.path, server.url("load.bin").absoluteString],
            in: work
        )
        #expect(run.status == 0, "\(run.stderr)")
        // In turn: the argument, then the file's two: 10 each.
        #expect(run.stdout.contains("\n  [200] 20\n") && run.stdout.contains("\n  [404] 10\n"), "\(run.stdout)")
        #expect(run.stdout.contains("Total time histogram (s):") && run.stdout.contains("|■"))
        let unreadable = try await haul(["load", "-i", work.appendingPathComponent("none.txt").path], in: work)
        #expect(unreadable.status == 7, "\(unreadable.stderr)")
    }

    /// The JSON object `haul load ARGUMENTS --json` printed, or a failed expectation.
    @Test("haul load -o FOLDER keeps each body as N-NAME, whole; a second run fetches them all again")
    func loadKeepsBodies() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let a = try server.makeFile("a.bin", size: 70_000, seed: 65)
        let b = try server.makeFile("b.bin", size: 1_234, seed: 66)
        let folder = work.appendingPathComponent("bodies")
        for _ in 0..<2 {
            let object = try await loadJSON(
                [
                    "-n", "6", "-c", "2", "-o", folder.path, server.url("a.bin").absoluteString,
                    server.url("b.bin").absoluteString,
                ],
                in: work
            )
            // Transferred each time, not found complete from the run before.
            #expect(object["completed"] as? Int == 6 && object["bytes"] as? Int == 3 * (70_000 + 1_234))
            let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
            // The run's journal and partials are gone with it.
            #expect(names == ["0-a.bin", "1-b.bin", "2-a.bin", "3-b.bin", "4-a.bin", "5-b.bin"], "\(names)")
            for index in 0..<6 {
                let kept = try Data(
                    contentsOf: folder.appendingPathComponent(index % 2 == 0 ? "\(index)-a.bin" : "\(index)-b.bin")
                )
                #expect(kept == (index % 2 == 0 ? a : b))
            }
        }
        // A file where the folder should be: refused before any download, nothing written.
        let file = work.appendingPathComponent("a-file")
        try Data("keep".utf8).write(to: file)
        let refused = try await haul(
            ["load", "-n", "1", "-o", file.path, server.url("a.bin").absoluteString],
            in: work
        )
        #expect(refused.status != 0 && refused.stderr.contains("is not a folder"), "\(refused.stderr)")
        #expect(try Data(contentsOf: file) == Data("keep".utf8))
    }

    @Test("haul load over https: HTTP/2 as negotiated, HTTP/1.1 with --http1.1; TLS phases of each connection")
    func loadOverHTTPS() async throws {
        let server = try await NginxServer.start(tls: true)
        let work = try makeTemporaryDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("tls.bin", size: 20_000, seed: 67)
        let url = server.httpsURL("tls.bin").absoluteString
        let certificate = try #require(server.certificate).path
        for (flags, expected) in [([String](), "HTTP/2.0"), (["--http1.1"], "HTTP/1.1")] {
            let before = server.accessLog().count
            let object = try await loadJSON(
                ["-n", "12", "-c", "4", "--ca-file", certificate] + flags + [url],
                in: work
            )
            #expect(object["completed"] as? Int == 12 && object["bytes"] as? Int == 12 * 20_000)
            let protocols = server.accessLog().dropFirst(before).map(\.protocolName)
            #expect(protocols.count == 12 && protocols.allSatisfy { $0 == expected }, "\(flags): \(protocols)")
            // A handshake measured for each connection opened, none for a reused one.
            let tls = try #require(object["tls"] as? [String: Double])
            #expect(tls["min"]! > 0 && tls["max"]! <= (object["firstByte"] as? [String: Double])?["max"] ?? 0)
        }
    }

    @Test("Ctrl-C: no download starts after it, those in flight stop uncounted, the report of what ended, exit 130")
    func loadStoppedBySignal() async throws {
        try await withFaultServer { server, work in
            // Taken in turn: a quick file, and one the gate holds after its first KiB; four at once end
            // up all held, with the quick ones done.
            let held = "/gate/1024/4096/held.bin"
            let (out, err) = (work.appendingPathComponent("out").path, work.appendingPathComponent("err").path)
            let process = try ChildProcess(
                HaulBinary.path,
                [
                    "load", "-n", "40", "-c", "4", "--json", server.url("file/4096/quick.bin").absoluteString,
                    server.url(String(held.dropFirst())).absoluteString,
                ],
                stdout: out,
                stderr: err
            )
            // A backstop only: the gate holds the four as long as the test needs.
            let deadline = ContinuousClock.now + .seconds(60)
            while server.requests(to: held).count < 4, process.isRunning, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(server.requests(to: held).count == 4)
            process.signal(SIGINT)
            let status = await process.exited()
            server.openGate()
            let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            #expect(status == 130, "\(stderr)")
            #expect(stderr.contains("4 in flight were stopped and are not in it"), "\(stderr)")
            let json =
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out))) as? [String: Any]
            let object = try #require(json)
            // The quick ones that ended, every one complete; the held ones neither failed nor counted.
            let requests = try #require(object["requests"] as? Int)
            #expect(requests >= 1 && object["completed"] as? Int == requests && object["failed"] as? Int == 0)
            #expect(object["errors"] as? [String: Int] == [:])
            // None started after the signal: the four held and the quick ones before them.
            #expect(
                server.requests(to: held).count == 4 && server.requests(to: "/file/4096/quick.bin").count == requests
            )
        }
    }

    @Test(
        "Ctrl-C in the open model's wait for the next download: the run stops then, not when it was due, and starts none"
    )
    func openModelStoppedWhileWaiting() async throws {
        try await withFaultServer { server, work in
            // One download each 50 s: the first at once, the second due 50 s later.
            let (out, err) = (work.appendingPathComponent("out").path, work.appendingPathComponent("err").path)
            let process = try ChildProcess(
                HaulBinary.path,
                ["load", "--rate", "0.02", "-z", "120", "--json", server.url("file/4096/once.bin").absoluteString],
                stdout: out,
                stderr: err
            )
            // A backstop only: the first request comes at once.
            let deadline = ContinuousClock.now + .seconds(30)
            while server.requests(to: "/file/4096/once.bin").isEmpty, process.isRunning, ContinuousClock.now < deadline
            {
                try await Task.sleep(for: .milliseconds(20))
            }
            process.signal(SIGINT)
            // The suite's time limit fails a run that waits for the second one's time.
            let status = await process.exited()
            let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            #expect(status == 130, "\(stderr)")
            // One download was ever started: ended (in the report) or stopped in flight, whichever
            // the signal found. (Before, the wait ran out and one more was started and stopped.)
            let json =
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out))) as? [String: Any]
            let ended = try #require(json?["requests"] as? Int)
            let stopped = stderr.firstMatch(of: /([0-9]+) in flight were stopped/).flatMap { Int($0.1) }
            #expect(stopped.map { ended + $0 } == 1, "\(ended) ended; \(stderr)")
            #expect(server.requests(to: "/file/4096/once.bin").count == 1)
        }
    }

    func loadJSON(_ arguments: [String], in work: URL) async throws -> [String: Any] {
        let run = try await haul(["load", "--json"] + arguments, in: work)
        #expect(run.status == 0, "\(run.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
        return try #require(json)
    }

    @Test("a server that takes 500 ms to answer: every time to first byte shows it, and nothing doubles it")
    func loadTimeToFirstByteIsTheServers() async throws {
        try await withFaultServer { server, work in
            let object = try await loadJSON(
                ["-n", "20", "-c", "4", server.url("delay/500/1000").absoluteString],
                in: work
            )
            #expect(object["completed"] as? Int == 20)
            let firstByte = try #require(object["timeToFirstByte"] as? [String: Double])
            // The delay is never hidden. How close p50 comes to it (0.504 s on a quiet machine, within
            // the issue's 5 %) is a measurement, not a test: on two cores shared with the whole suite
            // it read 0.536 once; a test only bounds it.
            #expect(firstByte["min"]! >= 0.5 && firstByte["p50"]! < 1, "\(firstByte)")
        }
    }

    @Test(
        "the open model: a server that stalls one answer for 1 s shows it in the latency's p99, not the service time's"
    )
    func loadOpenModelShowsTheStall() async throws {
        try await withFaultServer { server, work in
            // One at a time: the downloads due while the first answer stalls wait for it.
            let url = server.url("slow-first/1000/1000").absoluteString
            // A hundred on the schedule (-n, not -z: the backlog behind the stall runs to its end).
            let object = try await loadJSON(["--rate", "50", "-n", "100", "-c", "1", url], in: work)
            let requests = try #require(object["requests"] as? Int)
            #expect(requests == 100 && object["completed"] as? Int == requests)
            let latency = try #require(object["latency"] as? [String: Double])
            let total = try #require(object["total"] as? [String: Double])
            #expect(latency["p99"]! >= 0.9, "\(latency)")
            // The stalled download is one in a hundred: past the service time's p99, at its max.
            #expect(total["max"]! >= 1 && total["p99"]! < 0.9, "\(total)")
        }
    }

    @Test("haul load refuses no URL, -n 0, -n with -z, -c 0, a bad URL, negative retries or interval (exit 64)")
    func loadRefusesBadArguments() async throws {
        let work = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        for arguments in [
            ["load"], ["load", "-n", "0", "http://127.0.0.1:9/"],
            ["load", "-n", "2", "-z", "1", "http://127.0.0.1:9/"],
            ["load", "-c", "0", "http://127.0.0.1:9/"], ["load", "-n", "1", "ftp://example.invalid/x"],
            ["load", "--ramp", "2", "http://127.0.0.1:9/"], ["load", "--rate", "0", "http://127.0.0.1:9/"],
            ["load", "--retries", "-1", "http://127.0.0.1:9/"],
            ["load", "--progress-interval", "-1", "http://127.0.0.1:9/"],
        ] {
            let run = try await haul(arguments, in: work)
            #expect(run.status == 64, "\(arguments): \(run.status) \(run.stderr)")
        }
    }
}
