import ArgumentParser
import Foundation
import Testing

@testable import Haul
@testable import HaulCLI
@testable import HaulValues

/// `haul` and `haul worker` share their network and file options (issue 59, item 7): one
/// definition, one validation, one way into a manager's configuration.
@Suite("haul: option groups")
struct OptionGroupsTests {
    static let shared = [
        "--connect-timeout", "2.5", "--stall-timeout", "9", "--max-redirects", "3", "--proxy", "http://p.example:3128",
        "--noproxy", "a.example, b.example", "-A", "fetcher", "--compressed", "--limit-rate", "500K", "--total-rate",
        "2M", "-x", "4", "--min-split-size", "1M", "--buffer-size", "64K", "--checkpoint-interval", "2",
        "--file-allocation", "none", "--max-size", "10M", "--remote-time", "--resume-unvalidated",
    ]

    @Test("the same options mean the same configuration in haul and in haul worker")
    func sameOptionsSameConfiguration() throws {
        let haul = try HaulCommand.parse(Self.shared + ["http://h/a"])
        let worker = try WorkerCommand.parse(Self.shared + ["--queue", "postgres://db/q"])
        var fromHaul = DownloadManager.Configuration()
        haul.network.apply(to: &fromHaul)
        haul.files.apply(to: &fromHaul)
        var fromWorker = DownloadManager.Configuration()
        worker.network.apply(to: &fromWorker)
        worker.files.apply(to: &fromWorker)
        for configuration in [fromHaul, fromWorker] {
            #expect(configuration.connectTimeout == .milliseconds(2500) && configuration.stallTimeout == .seconds(9))
            #expect(configuration.maximumRedirects == 3 && configuration.proxy?.host == "p.example")
            #expect(configuration.proxyBypass == ["a.example", "b.example"] && configuration.userAgent == "fetcher")
            #expect(configuration.decodesCompression && configuration.connectionsPerFile == 4)
            #expect(configuration.rateLimits == RateLimits(perDownload: 512_000, total: 2_097_152))
            #expect(configuration.minimumSegmentSize == 1_048_576 && configuration.bufferSize == 65_536)
            #expect(configuration.checkpointInterval == .seconds(2) && !configuration.preallocatesFiles)
            #expect(configuration.maximumFileSize == 10_485_760 && configuration.setsModificationTimeFromServer)
            #expect(configuration.resumesWithoutValidator)
        }
    }

    @Test("a worker refuses a bad value with haul's own message")
    func sameValidation() {
        for (arguments, message) in [
            (["-x", "65"], "--connections must be from 1 to 64."),
            (["--limit-rate", "fast"], "--limit-rate must be a number of bytes per second"),
            (["--buffer-size", "1K"], "--buffer-size must be from 4096 (4K) to 1G."),
        ] {
            for command in [HaulCommand.self as any ParsableCommand.Type, WorkerCommand.self] {
                let extra = command == HaulCommand.self ? ["http://h/a"] : ["--queue", "postgres://db/q"]
                #expect {
                    _ = try command.parse(arguments + extra)
                } throws: { error in
                    command.message(for: error).hasPrefix(message)
                }
            }
        }
    }
}
