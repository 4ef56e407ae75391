import Foundation
import Glibc
import Testing

/// The `haul` executable built next to the test bundle, run as a user would: for the command's
/// tests and the worker-process tests alike.
enum HaulBinary {
    /// The `haul` binary built next to this test bundle.
    static var path: String {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("haul").path
    }

    /// What a run of `haul` ended with.
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `haul arguments` in `directory` to its end (awaited off Swift concurrency's threads).
    static func run(_ arguments: [String], in directory: URL, environment: [String: String]? = nil) async throws -> Run
    {
        try await run(program: path, arguments, in: directory, environment: environment)
    }

    /// Runs the executable at `program` with `arguments` in `directory` to its end: a tool a test
    /// checks haul's output with (Chromium, python3).
    static func run(
        program: String,
        _ arguments: [String],
        in directory: URL,
        environment: [String: String]? = nil
    ) async throws -> Run {
        let out = directory.appendingPathComponent("stdout-\(UUID().uuidString)").path
        let err = directory.appendingPathComponent("stderr-\(UUID().uuidString)").path
        defer { unlink(out); unlink(err) }
        let process = try ChildProcess(program, arguments, stdout: out, stderr: err, environment: environment)
        let status = await process.exited()
        return Run(
            status: status,
            stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        )
    }
}

/// Expects `secret` in none of `texts` and in no file under `directory`.
func expectNowhere(_ secret: String, under directory: URL, or texts: [String]) {
    for text in texts { #expect(!text.contains(secret)) }
    #expect(everyByte(under: directory).range(of: Data(secret.utf8)) == nil, "a file under \(directory.path)")
}
