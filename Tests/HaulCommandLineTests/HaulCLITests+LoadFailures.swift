import Foundation
import Testing

@testable import HaulTestSupport

/// `haul load` against an unhealthy server (issue 77): a failure is counted once and the next
/// download starts (no retry unless --retries), every answer is in the status table, errors are
/// told in their words, a timed run stops what is in flight at its end, and a run whose standard
/// error is not a terminal says how it goes.
extension HaulCLITests {
    /// The report of a `haul load --json` run, with its run.
    private func loadRun(_ arguments: [String], in work: URL) async throws -> (run: Run, object: [String: Any]) {
        let run = try await haul(["load", "--json"] + arguments, in: work)
        #expect(run.status == 0, "\(run.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        return (run, object)
    }

    /// `errorMessages` as (message, count) pairs, in the report's order.
    private func messages(_ object: [String: Any]) -> [(message: String, count: Int)] {
        (object["errorMessages"] as? [[String: Any]] ?? []).map {
            ($0["message"] as? String ?? "", $0["count"] as? Int ?? -1)
        }
    }

    @Test(
        "haul load against a refused port: every download counted failed once, the refusal in its words with its count"
    )
    func loadRefusedPort() async throws {
        let work = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let port = try NginxServer.freePort()
        let (run, object) = try await loadRun(
            ["-n", "2000", "-c", "50", "http://127.0.0.1:\(port)/x"],
            in: work
        )
        #expect(object["requests"] as? Int == 2000 && object["failed"] as? Int == 2000, "\(run.stdout)")
        #expect(object["completed"] as? Int == 0 && object["statusCodes"] as? [String: Int] == [:])
        #expect(object["errors"] as? [String: Int] == ["connection": 2000])
        let told = messages(object)
        #expect(told.count == 1 && told.first?.count == 2000, "\(told)")
        let message = try #require(told.first?.message)
        // The host and port, not the whole URL; curl's words and code.
        #expect(message.hasPrefix("127.0.0.1:\(port): ") && message.contains("(curl error 7)"), "\(message)")
        #expect(!message.contains("/x"), "\(message)")
        #expect(object["schema"] as? Int == 3)
    }

    @Test("haul load against a server answering 503: no retry, one request per download, [503] for every answer")
    func loadServerErrorsAreNotRetried() async throws {
        try await withFaultServer { server, work in
            let url = server.url("status/503").absoluteString
            let (run, object) = try await loadRun(["-n", "20", "-c", "4", url], in: work)
            #expect(server.requests(to: "/status/503").count == 20, "\(run.stdout)")
            #expect(object["failed"] as? Int == 20 && object["statusCodes"] as? [String: Int] == ["503": 20])
            let told = messages(object)
            #expect(told.count == 1 && told.first?.count == 20, "\(told)")
            #expect(told.first?.message.contains(":\(server.port): the server answered HTTP 503") == true, "\(told)")
            // The text report: each status and each message with its count.
            let text = try await haul(["load", "-n", "6", "-c", "2", url], in: work)
            #expect(text.stdout.contains("\n  [503] 6\n"), "\(text.stdout)")
            // No download completed: no table of times, not even its head.
            #expect(!text.stdout.contains("Times (s)"), "\(text.stdout)")
            #expect(
                text.stdout.contains("Errors (by class: httpStatus 6):\n  [6] 127.0.0.1:\(server.port): "),
                "\(text.stdout)"
            )
        }
    }

    @Test("haul load --retries 2 against a server answering 503: each download asks three times, every answer counted")
    func loadRetriesWhenAsked() async throws {
        try await withFaultServer { server, work in
            let url = server.url("busy/503/2/0/4096").absoluteString
            // The first two requests to the path get 503, the rest the file: the first download gets
            // there on its third request, the others at once.
            let (run, object) = try await loadRun(["-n", "5", "-c", "1", "--retries", "2", url], in: work)
            #expect(server.requests(to: "/busy/503/2/0/4096").count == 7, "\(run.stdout)")
            #expect(object["completed"] as? Int == 5 && object["failed"] as? Int == 0, "\(run.stdout)")
            #expect(object["statusCodes"] as? [String: Int] == ["503": 2, "200": 5], "\(run.stdout)")
        }
    }

    @Test("haul load against empty replies: each download counted failed once, over one connection each")
    func loadEmptyReplies() async throws {
        try await withFaultServer { server, work in
            let (run, object) = try await loadRun(
                ["-n", "20", "-c", "4", server.url("empty").absoluteString],
                in: work
            )
            #expect(server.requests(to: "/empty").count == 20, "\(run.stdout)")
            #expect(object["failed"] as? Int == 20 && object["requests"] as? Int == 20)
            let told = messages(object)
            #expect(told.count == 1 && told.first?.count == 20, "\(told)")
            #expect(told.first?.message.contains("(curl error 52)") == true, "\(told)")
        }
    }

    @Test(
        "haul load -z 1 against a server that holds every answer: the run ends at its time, what was in flight stopped and counted apart"
    )
    func loadTimedRunStopsInFlight() async throws {
        try await withFaultServer { server, work in
            defer { server.openGate() }
            let url = server.url("gate/1000/100000").absoluteString
            let (run, object) = try await loadRun(["-z", "1", "-c", "3", "--progress-interval", "0.1", url], in: work)
            // Three started, held at the gate until the run's end stopped them: neither completed nor failed.
            #expect(object["requests"] as? Int == 3 && object["cancelled"] as? Int == 3, "\(run.stdout)")
            #expect(object["completed"] as? Int == 0 && object["failed"] as? Int == 0, "\(run.stdout)")
            #expect(server.requests(to: "/gate/1000/100000").count == 3)
            // Standard error is not a terminal: lines say how the run went while it ran.
            let lines = run.stderr.split(separator: "\n").filter { $0.hasPrefix("haul load: ") }
            #expect(!lines.isEmpty && lines.allSatisfy { $0.contains(" in flight · ") }, "\(run.stderr)")
            #expect(lines.contains { $0.contains("· 3 in flight ·") }, "\(run.stderr)")
            let text = try await haul(["load", "-z", "0.5", "-c", "2", "--progress-interval", "0", url], in: work)
            #expect(
                text.stdout.contains("Downloads:     2 (0 completed, 0 failed, 2 in flight at the end, stopped)"),
                "\(text.stdout)"
            )
            #expect(text.stderr.isEmpty, "--progress-interval 0: \(text.stderr)")
        }
    }

    @Test("haul load --json's series: a row per second with what started and ended in it, and its p50 and p99")
    func loadSeries() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("series.bin", size: 4096, seed: 77)
        let (run, object) = try await loadRun(
            ["-n", "60", "-c", "3", server.url("series.bin").absoluteString],
            in: work
        )
        let series = try #require(object["series"] as? [[String: Any]], "\(run.stdout)")
        #expect(!series.isEmpty)
        #expect(series.enumerated().allSatisfy { $0.element["second"] as? Int == $0.offset }, "\(series)")
        #expect(series.map { $0["started"] as? Int ?? 0 }.reduce(0, +) == 60, "\(series)")
        #expect(series.map { $0["completed"] as? Int ?? 0 }.reduce(0, +) == 60, "\(series)")
        for row in series where (row["completed"] as? Int ?? 0) > 0 {
            let p50 = try #require(row["p50"] as? Double)
            let p99 = try #require(row["p99"] as? Double)
            #expect(p50 > 0 && p99 >= p50, "\(row)")
        }
    }
}
