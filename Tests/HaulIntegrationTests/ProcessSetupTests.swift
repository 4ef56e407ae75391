import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulIO
@testable import HaulTestSupport

/// What a manager changes in the whole process: signal dispositions and limits belong to a process,
/// so the test runs in a child process of this test bundle, which starts with SIGPIPE at its default.
@Suite("process-wide set-up", .timeLimit(.minutes(1)))
struct ProcessSetupTests {
    static let childVariable = "HAUL_PROCESS_SETUP_CHILD"

    /// Runs the test named `name` again in a child process of this test bundle, alone there, with
    /// ``childVariable`` set to a fresh folder, and expects it to pass.
    static func passesInAChild(_ name: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("haul-setup-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("output").path
        let bundle = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let child = try ChildProcess(
            bundle,
            ["--testing-library", "swift-testing", "--filter", name],
            stdout: output,
            stderr: output,
            environment: [Self.childVariable: directory.path]
        )
        let status = await child.exited()
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        #expect(status == 0, "the child's run:\n\(text)")
        #expect(text.contains("1 test") && text.contains("passed"), "the child's run:\n\(text)")
    }

    @Test("a closed standard descriptor gets /dev/null, so that no file of Haul's takes its number")
    func closedStandardDescriptorsAreFilled() async throws {
        guard ProcessInfo.processInfo.environment[Self.childVariable] != nil else {
            // In a process of its own: while standard input is closed here, any file another test
            // opens takes its number (seen: one did, and closed it, between two lines of this test).
            try await Self.passesInAChild("closedStandardDescriptorsAreFilled")
            return
        }
        // Standard input (no test reads it), moved aside for the test and put back after.
        let saved = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)
        try #require(saved >= 0)
        defer {
            dup2(saved, STDIN_FILENO)
            close(saved)
        }
        close(STDIN_FILENO)
        #expect(fcntl(STDIN_FILENO, F_GETFD) < 0)
        #expect(Reactor.openClosedStandardDescriptors() == [STDIN_FILENO])
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/0") == "/dev/null")
        // Open descriptors are left as they are.
        let before = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/2")
        #expect(Reactor.openClosedStandardDescriptors().isEmpty)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/2") == before)
    }

    @Test("SIGPIPE and the open-files limit are changed only as the configuration allows")
    func processSetupIsTheApplicationsChoice() async throws {
        guard ProcessInfo.processInfo.environment[Self.childVariable] != nil else {
            // Here: run this test again in a process of its own, and expect it to pass there.
            try await Self.passesInAChild("processSetupIsTheApplicationsChoice")
            return
        }
        // In the child: a soft limit below the hard one, and SIGPIPE at its default.
        let directory = URL(fileURLWithPath: ProcessInfo.processInfo.environment[Self.childVariable]!)
        var limit = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
        let hard = limit.rlim_max
        try #require(hard > 512)
        limit.rlim_cur = 512
        #expect(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
        #expect(Self.sigpipe() == Self.defaultHandler)

        var configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("kept")
        configuration.ignoresSIGPIPE = false
        configuration.raisesOpenFilesLimit = false
        configuration.maxConcurrentDownloads = 10_000
        let log = CapturedLog()
        configuration.logger = log.logger
        let kept = try DownloadManager(configuration: configuration)
        #expect(Self.sigpipe() == Self.defaultHandler)
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 && limit.rlim_cur == 512)
        // It runs within half of the limit it was left, and says so.
        #expect(log.text.contains("haul.slots=256"), "\(log.text)")
        await kept.shutdown()

        configuration = DownloadManager.Configuration()
        configuration.stateDirectory = directory.appendingPathComponent("changed")
        let changed = try DownloadManager(configuration: configuration)
        #expect(Self.sigpipe() == Self.ignoredHandler)
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 && limit.rlim_cur == hard)
        await changed.shutdown()
    }

    /// SIGPIPE's disposition now, as the handler's address.
    static func sigpipe() -> Int {
        var current = sigaction()
        sigaction(SIGPIPE, nil, &current)
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self)
    }
    /// `SIG_DFL` and `SIG_IGN`, as handler addresses.
    static let defaultHandler = 0
    static let ignoredHandler = 1
}
