import Foundation
import Glibc
import Testing

@testable import Haul

/// Issue 43, item 3: what curl, wget and aria2c users type without thinking.
extension HaulCLITests {
    @Test("-x4 -j2 -oFILE -L -O and a URL without a scheme: fetched over http://, and said so")
    func typedAsCurlAndAria2() async throws {
        let (server, work) = try startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("typed.bin", size: 300_000)
        let output = work.appendingPathComponent("typed.bin").path
        let bare = server.url("typed.bin").absoluteString.replacingOccurrences(of: "http://", with: "")
        let run = try await haul(["-x4", "-j2", "-o\(output)", "-L", "-O", bare], in: work)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == source)
        #expect(run.stderr.contains("has no scheme: fetching http://"), "\(run.stderr)")
    }

    @Test("-i - reads the list from standard input; --checksum takes aria2's sha-256=HEX; --max-size takes 1K")
    func listFromStandardInput() async throws {
        let (server, work) = try startServerAndDirectory()
        defer { stop(server, work) }
        let first = try server.makeFile("in1.bin", size: 40_000, seed: 5)
        let second = try server.makeFile("in2.bin", size: 50_000, seed: 6)
        let folder = work.appendingPathComponent("from-stdin").path
        let list = "\(server.url("in1.bin").absoluteString)\n\(server.url("in2.bin").absoluteString)\n"
        let messages = work.appendingPathComponent("stdin-run.txt").path
        let shell = try ChildProcess(
            "/bin/sh",
            ["-c", "printf '\(list)' | '\(Self.haulPath)' -i - -o '\(folder)'"],
            stdout: messages,
            stderr: messages
        )
        #expect(await shell.exited() == 0, "\((try? String(contentsOfFile: messages, encoding: .utf8)) ?? "")")
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/in1.bin")) == first)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/in2.bin")) == second)

        let sum = try IntegrityTests().coreutilsDigest(.sha256, of: first, in: work)
        let checked = work.appendingPathComponent("checked.bin").path
        let run = try await haul(
            ["--checksum", "sha-256=\(sum)", "-o", checked, server.url("in1.bin").absoluteString],
            in: work
        )
        #expect(run.status == 0, "\(run.stderr)")
        let wrong = try await haul(
            [
                "--checksum", "sha-256=" + String(repeating: "0", count: 64), "-o", checked + ".2",
                server.url("in1.bin").absoluteString,
            ],
            in: work
        )
        #expect(wrong.status == 6 && !FileManager.default.fileExists(atPath: checked + ".2"), "\(wrong.stderr)")
        let large = try await haul(
            [
                "--max-size", "1K", "-o", work.appendingPathComponent("large.bin").path,
                server.url("in2.bin").absoluteString,
            ],
            in: work
        )
        #expect(large.status != 0 && large.stderr.contains("maximum of 1024"), "\(large.stderr)")
    }
}
