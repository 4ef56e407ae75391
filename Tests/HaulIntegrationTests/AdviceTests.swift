import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Messages whose advice fits their cause (issue 17, item 5), from real failures of the fault server.
@Suite("Advice that fits the cause", .timeLimit(.minutes(2)))
struct AdviceTests {
    let faults = FaultTests()

    @Test(
        "a redirect to file:// says the address is one Haul does not follow, not to check the network",
        arguments: ["to-file", "to-ftp"]
    )
    func redirectToAnotherScheme(route: String) async throws {
        try await withFaultServer { server, directory in
            let (_, result) = try await faults.fetch(
                route,
                from: server,
                into: directory,
                configuration: faults.configuration(directory)
            )
            guard case .failure(let error) = result else {
                Issue.record("a redirect to another scheme must fail")
                return
            }
            #expect(error.curlCode == 1)
            #expect(error.description.contains("redirected to an address Haul does not download"), "\(error)")
            #expect(!error.description.contains("Check the address and the network"))
        }
    }

    @Test("a body cut short at every attempt: a file with bytes is told to resume; a stream, to try again")
    func cutShortEveryTime() async throws {
        try await withFaultServer { server, directory in
            var configuration = faults.configuration(directory, retryLimit: 1)
            configuration.stallTimeout = .seconds(10)
            try await withDownloadManager(configuration: configuration) { manager in
                let stream = try manager.stream(from: server.url("drop/0/100000"))
                await #expect {
                    for try await _ in stream {}
                } throws: { error in
                    let error = error as? DownloadError
                    return error?.code == .sizeMismatch
                        && error?.description.contains("Try again later; the download starts from its first byte")
                            == true
                        && error?.description.contains("Resume") == false
                }
            }
            // A file with bytes on disk (its first attempt brought 50,000), then cut at every attempt.
            try await withDownloadManager(configuration: configuration) { manager in
                let download = try manager.download(
                    from: server.url("short-then-cut/100000"),
                    to: directory.appendingPathComponent("out")
                )
                await #expect {
                    try await download.finished()
                } throws: { error in
                    let error = error as? DownloadError
                    return error?.code == .sizeMismatch
                        && error?.description.contains("Resume the download to fetch the rest") == true
                }
            }
        }
    }

    @Test("decoding bodies, a body cut short at every attempt: the failure says that each attempt starts over, and why")
    func decodedBodyCutEveryTime() async throws {
        try await withFaultServer { server, directory in
            var configuration = faults.patient(directory)
            configuration.retryLimit = 2
            configuration.decodesCompression = true
            let (_, result) = try await faults.fetch(
                "drop/30000/300000",
                from: server,
                into: directory,
                configuration: configuration
            )
            guard case .failure(let error) = result else {
                Issue.record("a body cut at 30 KB at every attempt, asked for from its start each time, must fail")
                return
            }
            #expect(error.code == .sizeMismatch || error.curlCode == 18, "\(error)")
            #expect(error.description.contains("(Configuration.decodesCompression): each attempt asks"), "\(error)")
            #expect(error.description(naming: { "«\($0)»" }).contains("(«decodesCompression»): each attempt asks"))
            // Every request asked for the body from its start.
            #expect(server.requests(to: "/drop/30000/300000").allSatisfy { $0.range == nil })
        }
    }

    @Test("a redirect loop names the setting and the flag that raise the limit")
    func redirectLoop() async throws {
        try await withFaultServer { server, directory in
            let (_, result) = try await faults.fetch(
                "loop",
                from: server,
                into: directory,
                configuration: faults.configuration(directory)
            )
            guard case .failure(let error) = result else {
                Issue.record("a redirect loop must fail")
                return
            }
            // The library's reader is told the property; a program's, the setting in its words, and
            // never the property (haul's options: HaulCommandTests).
            #expect(error.description.contains("(Configuration.maximumRedirects)"), "\(error)")
            let named = error.description(naming: { $0 == .maximumRedirects ? "--max-redirects" : "?" })
            #expect(named.contains("(--max-redirects)") && !named.contains("Configuration."), "\(named)")
        }
    }

    @Test("a retry's error is its cause, without the advice to resume later that only fits a failure")
    func retryCause() async throws {
        try await withFaultServer { server, directory in
            let (events, result) = try await faults.fetch(
                "busy/503/1/0/20000",
                from: server,
                into: directory,
                configuration: faults.configuration(directory)
            )
            #expect(throws: Never.self) { try result.get() }
            let retried = try #require(faults.retries(in: events).first?.0)
            #expect(retried.cause == "the server answered HTTP 503 (server error)")
            #expect(!retried.cause.contains("later"))
            #expect(retried.description.contains("try again later"))  // the failure's sentence keeps its advice
        }
    }
}
