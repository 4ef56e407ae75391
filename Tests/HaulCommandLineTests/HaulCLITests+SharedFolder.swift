import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 41, items 1 and 4: `haul` processes started together into one folder share its journal;
/// a URL one of them fetches is followed by the others, never fetched whole twice, and a process
/// killed mid-run leaves its downloads to another, which continues them from their bytes.
extension HaulCLITests {
    @Test("three haul -i runs at once into one folder, over lists that overlap: all exit 0, no URL fetched twice")
    func threeRunsIntoOneFolder() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        var sources: [String: Data] = [:]
        for index in 0..<9 {
            // /slow/: 512 KB/s per connection, about a second each: the runs overlap.
            sources["f\(index).bin"] = try server.makeFile("f\(index).bin", size: 400 * 1024 + index * 7919, seed: 40)
        }
        let output = work.appendingPathComponent("out")
        let lists = [[0, 1, 2, 3, 4, 5], [3, 4, 5, 6, 7, 8], [0, 2, 4, 6, 8]]
        var runs: [ChildProcess] = []
        for (number, list) in lists.enumerated() {
            let listPath = work.appendingPathComponent("list\(number).txt")
            try list.map { server.url("slow/f\($0).bin").absoluteString + "\n" }.joined()
                .write(to: listPath, atomically: true, encoding: .utf8)
            runs.append(
                try ChildProcess(
                    Self.haulPath,
                    ["--quiet", "-j", "3", "-i", listPath.path, "-o", output.path + "/"],
                    stderr: work.appendingPathComponent("err\(number).txt").path
                )
            )
        }
        for (number, run) in runs.enumerated() {
            let status = await run.exited()
            let stderr =
                (try? String(contentsOf: work.appendingPathComponent("err\(number).txt"), encoding: .utf8)) ?? ""
            #expect(status == 0, "run \(number): \(stderr)")
        }
        for (name, bytes) in sources {
            #expect(try Data(contentsOf: output.appendingPathComponent(name)) == bytes, "\(name)")
            let requests = await server.requests(to: "/slow/\(name)", atLeast: 1)
            // One request each: whole, once.
            #expect(requests.count == 1, "\(name): \(requests.map(\.range))")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: output.path).filter { $0 != ".haul" }
        #expect(Set(names) == Set(sources.keys), "no numbered copies: \(names.sorted())")
        // Every run closed its own lock file; none is left.
        let state = try FileManager.default.contentsOfDirectory(atPath: output.appendingPathComponent(".haul").path)
        #expect(!state.contains { $0.hasPrefix("owner-") }, "\(state)")
    }

    @Test("a haul run killed mid-run: another run of the same list follows, then finishes its files from their bytes")
    func killedRunIsTakenOver() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        // /gated/: 1 MiB at once, then 1 KB/s to a request without Range (hours for the second
        // MiB: the first run is still at it when it is killed, however late a loaded machine looks);
        // a resume runs at full speed.
        var sources: [String: Data] = [:]
        for index in 0..<3 {
            sources["g\(index).bin"] = try server.makeFile("g\(index).bin", size: 2 * 1024 * 1024, seed: 50)
        }
        let output = work.appendingPathComponent("out")
        let state = output.appendingPathComponent(".haul")
        let listPath = work.appendingPathComponent("list.txt")
        try sources.keys.sorted().map { server.url("gated/\($0)").absoluteString + "\n" }.joined()
            .write(to: listPath, atomically: true, encoding: .utf8)
        let arguments = [
            "--json", "-j", "3", "--checkpoint-interval", "0.2", "-i", listPath.path, "-o", output.path + "/",
        ]
        let firstOutput = work.appendingPathComponent("first.jsonl").path
        let first = try ChildProcess(Self.haulPath, arguments, stdout: firstOutput)
        defer { if first.isRunning { first.signal(SIGKILL) } }
        let clock = ContinuousClock()
        func partials() -> [Int64] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: state.path)) ?? []
            return names.filter { $0.hasSuffix(".part") }.map {
                FilePath.fileLength(state.appendingPathComponent($0).path) ?? 0
            }
        }
        var deadline = clock.now + .seconds(20)
        while partials().filter({ $0 >= 1024 * 1024 }).count < 3, clock.now < deadline, first.isRunning {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(
            partials().filter { $0 >= 1024 * 1024 }.count == 3,
            "\(partials()): \((try? String(contentsOfFile: firstOutput, encoding: .utf8)) ?? "")"
        )

        // The second run finds every URL running in the first: it says each is queued, and waits.
        let secondOutput = work.appendingPathComponent("second.jsonl").path
        let second = try ChildProcess(Self.haulPath, arguments, stdout: secondOutput)
        defer { if second.isRunning { second.signal(SIGKILL) } }
        func queuedLines() -> Int {
            ((try? String(contentsOfFile: secondOutput, encoding: .utf8)) ?? "").split(separator: "\n")
                .filter { $0.contains("\"event\":\"queued\"") }.count
        }
        deadline = clock.now + .seconds(20)
        while queuedLines() < 3, clock.now < deadline, second.isRunning {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(queuedLines() == 3)
        first.signal(SIGKILL)
        #expect(await first.exited() == 128 + SIGKILL)
        #expect(await second.exited() == 0)
        for (name, bytes) in sources {
            #expect(try Data(contentsOf: output.appendingPathComponent(name)) == bytes, "\(name)")
            // Two requests: the first run's, whole, and the second's from the bytes it left.
            let requests = await server.requests(to: "/gated/\(name)", atLeast: 2)
            #expect(requests.count == 2 && requests.first?.range == "-", "\(name): \(requests.map(\.range))")
            let offset = requests.last.flatMap { Int($0.range.dropFirst("bytes=".count).dropLast()) }
            #expect(offset.map { $0 >= 1024 * 1024 } == true, "\(name): \(requests.map(\.range))")
        }
        let completed = ((try? String(contentsOfFile: secondOutput, encoding: .utf8)) ?? "").split(separator: "\n")
            .filter { $0.contains("\"event\":\"completed\"") }.count
        #expect(completed == 3)
    }
}
