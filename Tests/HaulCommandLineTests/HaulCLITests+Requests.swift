import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulCLI
@testable import HaulTestSupport

/// `-H`, `--proxy`, `--noproxy`, `--no-proxy` and the proxy environment variables (issue 18,
/// item 8), through the binary: the variables are the process's, so only a child process tests them.
extension HaulCLITests {

    @Test("-H sends a header on every request; without it the server refuses; the token is printed and stored nowhere")
    func headerFlag() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("h.bin", size: 400_000)
        let output = work.appendingPathComponent("out")
        let url = server.url("bearer/h.bin").absoluteString
        let denied = try await haul(["-o", output.path + "/", url], in: work)
        #expect(denied.status != 0)
        #expect(denied.stderr.contains("HTTP 401"), "\(denied.stderr)")
        let token = "Authorization: Bearer \(NginxServer.bearer)"
        for arguments in [
            ["-H", token, "-o", output.path + "/", url], ["--json", "--header", token, "-o", output.path + "/", url],
        ] {
            let run = try await haul(arguments, in: work)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(!run.stdout.contains(NginxServer.bearer) && !run.stderr.contains(NginxServer.bearer))
        }
        #expect(try Data(contentsOf: output.appendingPathComponent("h.bin")) == source)
        #expect(everyByte(under: output).range(of: Data(NginxServer.bearer.utf8)) == nil)
    }

    @Test("-H refuses what is not a header, or is one haul sets itself, without repeating the value")
    func badHeaderFlag() async throws {
        let work = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        for (value, says) in [
            ("no-colon-\(NginxServer.bearer)", "Name: value"), ("Range: bytes=0-\(NginxServer.bearer)", "'Range'"),
            ("Bad Name: \(NginxServer.bearer)", "header name"), ("X-Empty:", "X-Empty;"),
        ] {
            let run = try await haul(["-H", value, "http://127.0.0.1:1/x"], in: work)
            #expect(run.status == 64, "\(value): \(run.stderr)")
            #expect(run.stderr.contains(says), "\(value): \(run.stderr)")
            #expect(!run.stderr.contains(NginxServer.bearer))
        }
    }

    @Test("http_proxy (with credentials) is honoured; --no-proxy, no_proxy and --proxy \"\" go direct; --proxy wins")
    func proxyVariables() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let proxy = try await ForwardProxy.start(authenticated: true)
        defer { proxy.stop() }
        let names = ["env", "ignored", "bypassed", "empty", "flag"]
        var sources: [String: Data] = [:]
        for (index, name) in names.enumerated() {
            sources[name] = try server.makeFile("\(name).bin", size: 200_000, seed: UInt64(index + 10))
        }
        let output = work.appendingPathComponent("out")
        let withProxy = ["http_proxy": proxy.url(credentials: true).absoluteString]
        func fetch(_ name: String, _ flags: [String] = [], environment: [String: String] = withProxy) async throws {
            let run = try await haul(
                ["--json"] + flags + ["-o", output.path + "/", server.url("\(name).bin").absoluteString],
                in: work,
                environment: environment
            )
            #expect(run.status == 0, "\(name): \(run.stderr)")
            #expect(!run.stdout.contains(ForwardProxy.password) && !run.stderr.contains(ForwardProxy.password))
        }
        try await fetch("env")
        try await fetch("ignored", ["--no-proxy"])
        try await fetch("bypassed", environment: withProxy.merging(["no_proxy": "127.0.0.1"]) { $1 })
        try await fetch("empty", ["--proxy", ""])
        try await fetch("flag", ["--proxy", proxy.url(credentials: true).absoluteString], environment: [:])
        for name in names {
            #expect(try Data(contentsOf: output.appendingPathComponent("\(name).bin")) == sources[name], "\(name)")
        }
        let through = proxy.requests()
        #expect(through.filter { $0.contains("/env.bin") } == ["GET \(server.url("env.bin")) HTTP/1.1"])
        #expect(through.filter { $0.contains("/flag.bin") } == ["GET \(server.url("flag.bin")) HTTP/1.1"])
        for direct in ["ignored", "bypassed", "empty"] {
            #expect(!through.contains { $0.contains("/\(direct).bin") }, "\(direct) went through the proxy")
            #expect(server.accessLog().filter { $0.uri == "/\(direct).bin" }.map(\.status) == [200])
        }
        #expect(everyByte(under: output).range(of: Data(ForwardProxy.password.utf8)) == nil)
    }

    @Test("--content-disposition names files as the server says, prints those names, and -o FILE still wins")
    func contentDispositionFlag() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("c.bin", size: 100_000)
        let output = work.appendingPathComponent("out")
        let urls = [server.url("cd/utf8/c.bin").absoluteString, server.url("cd/traversal/c.bin").absoluteString]
        let run = try await haul(["--content-disposition", "-o", output.path + "/"] + urls, in: work)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("-> \(output.path)/naïve café.txt"), "\(run.stdout)")
        #expect(run.stdout.contains("-> \(output.path)/escaped.txt"), "\(run.stdout)")
        #expect(try Data(contentsOf: output.appendingPathComponent("naïve café.txt")) == source)
        #expect(try Data(contentsOf: output.appendingPathComponent("escaped.txt")) == source)
        // Without the flag, names come from the URL, as wget does by default.
        let plain = try await haul(["-o", output.path + "/", server.url("cd/plain/c.bin").absoluteString], in: work)
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(FileManager.default.fileExists(atPath: output.appendingPathComponent("c.bin").path))
        let named = output.appendingPathComponent("mine.bin")
        let explicit = try await haul(
            ["--content-disposition", "-o", named.path, server.url("cd/plain/c.bin").absoluteString],
            in: work
        )
        #expect(explicit.status == 0, "\(explicit.stderr)")
        #expect(try Data(contentsOf: named) == source)
        #expect(!FileManager.default.fileExists(atPath: output.appendingPathComponent("report.pdf").path))
    }

    @Test("an aria2 input file: mirrors after a dead URL, out=, checksum= (right and wrong) and header= with a secret")
    func inputFileForm() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let a = try server.makeFile("a.bin", size: 300_000, seed: 41)
        let b = try server.makeFile("b.bin", size: 200_000, seed: 42)
        try server.makeFile("c.bin", size: 100_000, seed: 43)
        let digest = try await coreutilsDigest(.sha256, of: a, in: work)
        let wrong = String(repeating: "0", count: 64)
        let list = work.appendingPathComponent("list.txt")
        try """
        # a file with a mirror after a URL where nothing listens
        http://127.0.0.1:1/a.bin\t\(server.url("a.bin"))
          out=sub/renamed-a.bin
          checksum=sha-256=\(digest)
        \(server.url("bearer/b.bin"))
          header=Authorization: Bearer \(NginxServer.bearer)
          split=4
        \(server.url("c.bin"))
          checksum=sha-256=\(wrong)
        """.write(to: list, atomically: true, encoding: .utf8)
        let output = work.appendingPathComponent("out")
        let run = try await haul(["--json", "-i", list.path, "-o", output.path + "/"], in: work)
        #expect(run.status == 6, "\(run.stderr)")  // c.bin's checksum is wrong (exit 6: a check failed)
        #expect(try Data(contentsOf: output.appendingPathComponent("sub/renamed-a.bin")) == a)
        #expect(try Data(contentsOf: output.appendingPathComponent("b.bin")) == b)
        #expect(!FileManager.default.fileExists(atPath: output.appendingPathComponent("c.bin").path))
        #expect(run.stderr.contains("'split' (line 7) is not supported"), "\(run.stderr)")
        #expect(run.stdout.contains("\"event\":\"switched\""), "\(run.stdout)")
        #expect(run.stdout.contains("\"code\":\"checksumMismatch\""), "\(run.stdout)")
        #expect(!run.stdout.contains(NginxServer.bearer) && !run.stderr.contains(NginxServer.bearer))
        #expect(everyByte(under: output).range(of: Data(NginxServer.bearer.utf8)) == nil)
        #expect(server.accessLog().filter { $0.uri == "/bearer/b.bin" }.map(\.status) == [200])
    }

    @Test("--limit-rate holds a download to its rate; a rate haul cannot read is refused")
    func limitRateFlag() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("l.bin", size: 1_500_000)
        let output = work.appendingPathComponent("out")
        let clock = ContinuousClock()
        let start = clock.now
        let run = try await haul(
            ["--limit-rate", "500K", "-o", output.path + "/", server.url("l.bin").absoluteString],
            in: work
        )
        let took = clock.now - start
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try Data(contentsOf: output.appendingPathComponent("l.bin")) == source)
        // 1,500,000 bytes at 512,000 B/s: not sooner than 2.9 s, less the bucket's first burst.
        #expect(took >= .seconds(2.5), "took \(took)")
        let refused = try await haul(["--total-rate", "fast", server.url("l.bin").absoluteString], in: work)
        #expect(refused.status == 64 && refused.stderr.contains("--total-rate must be a number"), "\(refused.stderr)")
    }

    @Test("-x 4 splits a file over four connections (--json says so), and --limit-rate holds them all together")
    func connectionsFlag() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let size = 3 * 1024 * 1024
        let source = try server.makeFile("x.bin", size: size, seed: 22)
        let output = work.appendingPathComponent("out")
        let clock = ContinuousClock()
        let start = clock.now
        let run = try await haul(
            [
                "--json", "-x", "4", "--min-split-size", "256K", "--limit-rate", "1M", "-o", output.path + "/",
                server.url("x.bin").absoluteString,
            ],
            in: work
        )
        let took = clock.now - start
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try Data(contentsOf: output.appendingPathComponent("x.bin")) == source)
        #expect(run.stdout.contains("\"connections\":4"), "\(run.stdout)")
        // 3 MiB at 1 MiB/s over four connections sharing one bucket: not sooner than 3 s, less the
        // bucket's first burst and the chunks in flight.
        #expect(took >= .seconds(2.5), "took \(took)")
        // A connection whose chunk was refused as curl gave it again after the limiter's pause once
        // hung until the stall timeout (30 s, haul's default): curl reports no end for it (the
        // scheduler ends it). The bound is that timeout, not the machine's speed.
        #expect(took < .seconds(30), "took \(took)")
        let ranged = server.accessLog().filter { $0.uri == "/x.bin" && $0.range.hasPrefix("bytes=") }
        #expect(ranged.count >= 3)
        for bad in [
            ["-x", "0"], ["-x", "65"], ["--min-split-size", "1K"], ["--min-split-size", "big"],
            ["--file-allocation", "prealloc"],
        ] {
            let refused = try await haul(bad + [server.url("x.bin").absoluteString], in: work)
            #expect(refused.status == 64, "\(bad): \(refused.stderr)")
        }
    }

    @Test(
        "--file-allocation: falloc (the default) fails a file larger than the disk at once; none when the disk is full"
    )
    func fileAllocationFlag() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let size = 8 * 1024 * 1024
        try server.makeFile("alloc.bin", size: size)
        for mode in ["falloc", "none"] {
            try await withSmallDisk(megabytes: 3) { disk in
                let run = try await haul(
                    [
                        "--json", "--retries", "0", "-x", "4", "--file-allocation", mode, "-o", disk.path + "/",
                        server.url("alloc.bin").absoluteString,
                    ],
                    in: work
                )
                #expect(run.status != 0)
                #expect(run.stdout.contains("\"code\":\"fileSystem\""), "\(mode): \(run.stdout)")
                // Preallocation says how much the file needs before any byte is written.
                #expect(run.stdout.contains("needs \(size) bytes") == (mode == "falloc"), "\(mode): \(run.stdout)")
                #expect(!FileManager.default.fileExists(atPath: disk.appendingPathComponent("alloc.bin").path))
            }
        }
    }

    @Test("a signed link refreshed between runs (its query changed) continues from the bytes on disk")
    func refreshedLinkBetweenRuns() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let data = try server.makeFile("sig.bin", size: 3 * 1024 * 1024)
        let destination = work.appendingPathComponent("out/sig.bin")
        let events = work.appendingPathComponent("sig.jsonl").path
        let first = try await startReceiving(
            ["--json", "-o", destination.path, server.url("gated/sig.bin?sig=AAA").absoluteString],
            events: events
        )
        first.signal(SIGTERM)
        #expect(await first.exited() == 143)
        let second = try await haul(
            ["-o", destination.path, server.url("gated/sig.bin?sig=BBB").absoluteString],
            in: work
        )
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try Data(contentsOf: destination) == data)
        let log = server.accessLog()
        #expect(log.filter { $0.uri == "/gated/sig.bin?sig=AAA" }.map(\.status) == [200])
        let continued = log.filter { $0.uri == "/gated/sig.bin?sig=BBB" }
        #expect(continued.map(\.status) == [206] && continued.first?.range != "-", "\(continued)")
    }
}
