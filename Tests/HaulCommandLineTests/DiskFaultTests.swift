import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 74, item 2: the kernel's faults as inputs, as SQLite's test suite fails its N-th I/O call.
/// A small run of `haul` (three files from nginx) counts the calls that write under its output
/// folder (the partials, the journal and its WAL, syncs, preallocations, renames and links:
/// `Tests/Shims/iofault.c`, preloaded); then, for every N, the N-th call fails, and after it:
/// every file at its name is whole or absent, nothing is under another name, every row the
/// journal calls completed has its file whole, the process exits with a status (no crash), and
/// a rerun without the fault completes every file once, whole, its rows completed.
///
/// Runs alone (`scripts/test.sh`): two hundred short processes, two at a time.
@Suite("haul under injected disk faults", .serialized, .timeLimit(.minutes(10)))
struct DiskFaultTests {
    /// The shim, compiled into the test's folder.
    static func compileShim(into folder: URL) async throws -> String {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Shims/iofault.c").path
        let library = folder.appendingPathComponent("iofault.so").path
        let compilers: [String] = ["/usr/bin/cc", "/opt/swift/usr/bin/clang"]
        let compiler = try #require(
            compilers.first { FileManager.default.isExecutableFile(atPath: $0) },
            "no C compiler (gcc is installed by scripts/install-deps.sh)"
        )
        let compile = try ChildProcess(compiler, ["-O2", "-shared", "-fPIC", source, "-ldl", "-o", library])
        guard await compile.exited() == 0 else { throw TestFailure("could not compile \(source)") }
        return library
    }

    struct Fault: Sendable, CustomStringConvertible {
        var call: Int
        var errno: String
        /// Every counted call from `call` on fails too: a disk that stays full.
        var persists: Bool
        var description: String { "call \(call) failing with \(errno)\(persists ? " and every one after" : "")" }
    }

    @Test(
        "every write, sync, preallocation, rename, link and origin record failing in turn (ENOSPC from then on, or EIO once): files whole under their own names, completed rows true, the rerun completes each once"
    )
    func everyCallFailsInTurn() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let library = try await Self.compileShim(into: work)
        var sources: [String: Data] = [:]
        for (index, size) in [300_000, 64 * 1024, 700_000].enumerated() {
            sources["f\(index).bin"] = try server.makeFile("f\(index).bin", size: size, seed: UInt64(7400 + index))
        }
        let list = work.appendingPathComponent("list.txt")
        try sources.keys.sorted().map { server.url($0).absoluteString + "\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)

        // The calls a run without a fault makes.
        let counting = work.appendingPathComponent("counting")
        let countFile = work.appendingPathComponent("count").path
        let clean = try await run(list, into: counting, library: library, extra: ["HAUL_FAULT_COUNT": countFile])
        #expect(clean.status == 0, "\(clean.stderr)")
        let calls = try #require(Int(String(contentsOfFile: countFile, encoding: .utf8).trimmingWhitespace))
        #expect(calls > 20, "the shim counted \(calls) calls: it does not see Haul's writes")

        var faults: [Fault] = []
        for call in 1...calls {
            faults.append(Fault(call: call, errno: "ENOSPC", persists: true))
            faults.append(Fault(call: call, errno: "EIO", persists: false))
        }
        let sourceFiles = sources
        var failedCalls = 0
        var failedNames: Set<String> = []
        // Two processes at a time, each in a folder of its own.
        try await withThrowingTaskGroup(of: String?.self) { group in
            var next = 0
            func addNext() {
                guard next < faults.count else { return }
                let (fault, index) = (faults[next], next)
                next += 1
                group.addTask {
                    try await self.check(
                        fault,
                        index: index,
                        list: list,
                        work: work,
                        library: library,
                        sources: sourceFiles
                    )
                }
            }
            addNext()
            addNext()
            while let failed = try await group.next() {
                if let failed {
                    failedCalls += 1
                    failedNames.insert(failed)
                }
                addNext()
            }
        }
        // Most faults hit: a run whose calls all passed would show the shim is not injecting.
        #expect(failedCalls >= calls, "only \(failedCalls) of \(faults.count) runs met their fault")
        // Every kind of call Haul makes under the output folder was failed at least once, the
        // origin a placed file records among them (a best-effort write that never decides its fate).
        for name in ["pwrite", "fdatasync", "fsetxattr"] {
            #expect(failedNames.contains { $0.hasPrefix(name) }, "\(name) never failed: \(failedNames.sorted())")
        }
    }

    /// One faulty run and its rerun; returns the name of the call that failed when the fault was met
    /// (the shim logged it).
    private func check(
        _ fault: Fault,
        index: Int,
        list: URL,
        work: URL,
        library: String,
        sources: [String: Data]
    ) async throws -> String? {
        let output = work.appendingPathComponent("run-\(index)")
        defer { try? FileManager.default.removeItem(at: output) }
        let log = work.appendingPathComponent("log-\(index)").path
        defer { unlink(log) }
        let faulty = try await run(
            list,
            into: output,
            library: library,
            extra: [
                "HAUL_FAULT_AT": "\(fault.call)",
                "HAUL_FAULT_PERSIST": fault.persists ? "1" : "0",
                "HAUL_FAULT_ERRNO": fault.errno,
                "HAUL_FAULT_LOG": log,
            ]
        )
        // "N name path" per failed call; the first names the fault.
        let met = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: " ").dropFirst().first
            .map(String.init)
        #expect(faulty.status >= 0 && faulty.status <= 127, "\(fault): exit \(faulty.status)\n\(faulty.stderr)")
        expectWhole(output, sources: sources, after: "\(fault), the faulty run")
        let rows = (try? DownloadManager.journalEntries(stateDirectory: output.appendingPathComponent(".haul"))) ?? []
        for row in rows where row.state == .completed {
            let name = FilePath.lastComponent(of: row.destination)
            #expect(
                FileManager.default.contents(atPath: row.destination) == sources[name],
                "\(fault): the journal says \(name) completed, the file is not whole"
            )
        }
        let rerun = try await HaulBinary.run(["-q", "-o", output.path + "/", "-i", list.path], in: work)
        #expect(rerun.status == 0, "\(fault): the rerun exited \(rerun.status)\n\(rerun.stderr)")
        expectWhole(output, sources: sources, after: "\(fault), the rerun", complete: true)
        let after = try DownloadManager.journalEntries(stateDirectory: output.appendingPathComponent(".haul"))
        #expect(
            after.count == sources.count && after.allSatisfy { $0.state == .completed },
            "\(fault): rows after the rerun: \(after.map { "\(FilePath.lastComponent(of: $0.destination)) \($0.state)" })"
        )
        return met
    }

    /// Runs `haul` on `list` into `output` with the shim preloaded (counting what it does under
    /// `output`), without retries: a fault ends the download at once.
    private func run(_ list: URL, into output: URL, library: String, extra: [String: String]) async throws
        -> HaulBinary.Run
    {
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        var environment = ["LD_PRELOAD": library, "HAUL_FAULT_UNDER": output.path]
        environment.merge(extra) { $1 }
        return try await HaulBinary.run(
            ["-q", "--retries", "0", "-j", "3", "-o", output.path + "/", "-i", list.path],
            in: list.deletingLastPathComponent(),
            environment: environment
        )
    }

    /// Each file at its name holds its own bytes, whole (or, unless `complete`, is absent), and
    /// nothing but the files and `.haul` is in `output`: no file under another's name, no `name.1`.
    private func expectWhole(_ output: URL, sources: [String: Data], after: String, complete: Bool = false) {
        let names = Set((try? FileManager.default.contentsOfDirectory(atPath: output.path)) ?? []).subtracting([".haul"]
        )
        #expect(names.isSubset(of: Set(sources.keys)), "\(after): unexpected names \(names.sorted())")
        for (name, source) in sources {
            let data = FileManager.default.contents(atPath: output.appendingPathComponent(name).path)
            if data == nil, !complete { continue }
            #expect(
                data == source,
                "\(after): \(name) is \(data.map { "\($0.count) bytes, not its own" } ?? "missing")"
            )
        }
    }
}
