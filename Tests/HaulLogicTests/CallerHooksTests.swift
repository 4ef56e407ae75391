import FoundationEssentials
import Testing

@testable import HaulScheduler
@testable import HaulTransfer
@testable import HaulValues

/// What a transfer is told of the application's hooks (``CallerHooks``) where no hook has to run:
/// the header provider missing, and each answer the URL refresher can give.
@Suite("The application's hooks")
struct CallerHooksTests {
    /// The layer's own header type (the test module also sees the public one of the same name).
    typealias Header = HaulValues.DownloadHeader

    let cause = HaulValues.DownloadError(code: .httpStatus, url: "http://a.example/f", httpStatus: 403)
    let url = URL(string: "http://a.example/f")!
    let destination = URL(fileURLWithPath: "/tmp/f")
    let id = HaulValues.DownloadID(rawValue: "d")

    func headersQuestion(names: [String] = ["X-Key"]) -> HeadersQuestion {
        HeadersQuestion(names: names, url: url, destination: destination, urlForErrors: url.absoluteString)
    }

    var freshURLQuestion: FreshURLQuestion {
        FreshURLQuestion(cause: cause, url: url, destination: destination, urlForErrors: url.absoluteString)
    }

    @Test("no header provider: the transfer fails at once, naming the headers it was queued with")
    func noHeaderProvider() {
        let failure = CallerHooks.askForHeaders(
            headersQuestion(names: ["Authorization", "X-Key"]),
            of: id,
            provider: nil,
            answer: { _ in Issue.record("answered with no provider") }
        )
        #expect(failure?.code == .headersUnavailable)
        #expect(failure?.url == "http://a.example/f")
        #expect(failure?.detail?.contains("'Authorization', 'X-Key'") == true)
    }

    @Test("no URL refresher: nothing is asked")
    func noRefresher() {
        let asked = CallerHooks.askForFreshURL(
            freshURLQuestion,
            of: id,
            refresher: nil,
            answer: { _ in Issue.record("answered with no refresher") }
        )
        #expect(!asked)
    }

    struct Refusal: Error, CustomStringConvertible {
        var description: String { "no key for this host" }
    }

    /// The provider's answer for `provider`, as the transfer would be told of it.
    func headers(from provider: @escaping SchedulerSettings.HeaderValues) async -> Result<
        [Header], HaulValues.DownloadError
    > {
        await withCheckedContinuation { continuation in
            let failure = CallerHooks.askForHeaders(
                headersQuestion(),
                of: id,
                provider: provider,
                answer: { continuation.resume(returning: $0) }
            )
            #expect(failure == nil)
        }
    }

    @Test("the header provider is asked for the download's names; its values are checked as a request's")
    func headerProvider() async throws {
        let asked = try await headers { id, url, destination, names in
            #expect(id.rawValue == "d" && url.absoluteString == "http://a.example/f")
            #expect(destination.path == "/tmp/f" && names == ["X-Key"])
            return [Header(name: "X-Key", value: "k", isSensitive: true)]
        }.get()
        #expect(asked == [Header(name: "X-Key", value: "k", isSensitive: true)])
        let bad = await headers { _, _, _, _ in [Header(name: "X-Key", value: "a\nb", isSensitive: true)] }
        #expect(throws: HaulValues.DownloadError.self) { try bad.get() }
        if case .failure(let error) = bad { #expect(error.code == .invalidHeader) }
        let failed = await headers { _, _, _, _ in throw Refusal() }
        guard case .failure(let error) = failed else {
            Issue.record("\(failed)")
            return
        }
        #expect(error.code == .headersUnavailable && error.url == "http://a.example/f")
        let said = "the header provider failed for the headers 'X-Key': no key for this host"
        #expect(error.detail?.contains(said) == true)
    }

    @Test("the URL refresher is asked with the status that made the download ask; its failure is the download's")
    func refresherFails() async {
        let result = await withCheckedContinuation { continuation in
            let asked = CallerHooks.askForFreshURL(
                freshURLQuestion,
                of: id,
                refresher: { _, _, _, status in
                    #expect(status == 403)
                    throw Refusal()
                },
                answer: { continuation.resume(returning: $0) }
            )
            #expect(asked)
        }
        guard case .failure(let error) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(error.code == .httpStatus && error.httpStatus == 403)
        #expect(error.detail == "the URL refresher failed: no key for this host")
    }

    @Test("no fresh URL, or the refresher failed: refused, with its error; nothing kept")
    func refused() {
        let none = CallerHooks.input(for: .success(nil))
        guard case .urlRefused(nil) = none.input else {
            Issue.record("\(none.input)")
            return
        }
        #expect(none.kept == nil)
        let failed = CallerHooks.input(for: .failure(cause))
        guard case .urlRefused(let error?) = failed.input else {
            Issue.record("\(failed.input)")
            return
        }
        #expect(error == cause && failed.kept == nil)
    }

    @Test(
        "a fresh URL or headers a request could not have are rejected, nothing kept",
        arguments: [
            ("ftp://a.example/f", [], HaulValues.DownloadError.Code.unsupportedScheme),
            ("http:///f", [], .invalidURL),
            ("http://a.example/f", [Header(name: "X-Key", value: "a\r\nb", isSensitive: true)], .invalidHeader),
        ]
    )
    func rejected(url: String, headers: [Header], code: HaulValues.DownloadError.Code) {
        let answer = CallerHooks.input(for: .success((URL(string: url)!, headers)))
        guard case .freshURLRejected(let error) = answer.input else {
            Issue.record("\(answer.input)")
            return
        }
        #expect(error.code == code)
        #expect(answer.kept == nil)
        #expect(!"\(error)".contains("a\r\nb"))
    }

    @Test("a fresh URL with its headers: the transfer moves to it, and the process keeps both")
    func moves() {
        let url = URL(string: "https://user:secret@b.example/f?sig=1")!
        let headers = [Header(name: "X-Key", value: "new", isSensitive: true)]
        let answer = CallerHooks.input(for: .success((url, headers)))
        guard case .freshURL(let movedTo, let sent) = answer.input else {
            Issue.record("\(answer.input)")
            return
        }
        #expect(movedTo == url && sent == headers)
        #expect(answer.kept?.url == url && answer.kept?.headers == headers)
        let withoutHeaders = CallerHooks.input(for: .success((url, nil)))
        #expect(withoutHeaders.kept?.url == url && withoutHeaders.kept?.headers == nil)
    }
}
