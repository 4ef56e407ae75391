import FoundationEssentials
import HaulTransfer
import HaulValues

/// The application's hooks an admitted transfer waits on in its slot (its machine in
/// `awaitingHeaders` or `awaitingFreshURL`; paused or cancelled meanwhile like any admitted
/// download): the header provider (``SchedulerSettings/headerValues``), asked for the header values
/// of a download restored from the journal, which holds their names only, and the URL refresher
/// (``SchedulerSettings/freshURL``), asked when a URL answers 401, 403 or 410. Each is asked off the
/// loop in a `Task`, whose result goes to `answer` (the scheduler's sends it through the inbox,
/// `.headersArrived` or `.urlRefreshed`, naming the transfer it asked for, so that a later transfer
/// of the same download does not take an earlier one's answer). No state: the scheduler hands each
/// call what it needs.
enum CallerHooks {
    /// Asks `provider` for the values of `question`'s headers (checked as a request's are); the
    /// result goes to `answer`, on the task's thread. Returns at once, with the failure to hand the
    /// transfer, when there is no provider: a download is never sent without its headers.
    static func askForHeaders(
        _ question: HeadersQuestion,
        of id: DownloadID,
        provider: SchedulerSettings.HeaderValues?,
        answer: @escaping @Sendable (Result<[DownloadHeader], DownloadError>) -> Void
    ) -> DownloadError? {
        let names = question.names
        let listed = names.map { "'\($0)'" }.joined(separator: ", ")
        guard let provider else {
            return DownloadError(
                code: .headersUnavailable,
                url: question.urlForErrors,
                detail: "it was queued with the headers \(listed), whose values this process was not given"
            )
        }
        let (url, destination, urlForErrors) = (question.url, question.destination, question.urlForErrors)
        Task {
            let result: Result<[DownloadHeader], DownloadError>
            do {
                let headers = try await provider(id, url, destination, names)
                result = Result { () throws(DownloadError) in
                    try DownloadHeader.check(headers, url: urlForErrors)
                    return headers
                }
            } catch {
                // The provider's error is the application's: its type and words, which it controls.
                result = .failure(
                    DownloadError(
                        code: .headersUnavailable,
                        url: urlForErrors,
                        detail: "the header provider failed for the headers \(listed): \(error)"
                    )
                )
            }
            answer(result)
        }
        return nil
    }

    /// Asks `refresher` for a fresh URL after `question`'s cause; the result goes to `answer`, on
    /// the task's thread (``input(for:)`` says what the transfer is told of it). `false`, and
    /// nothing asked, when there is no refresher.
    static func askForFreshURL(
        _ question: FreshURLQuestion,
        of id: DownloadID,
        refresher: SchedulerSettings.URLRefresher?,
        answer: @escaping @Sendable (Result<SchedulerSettings.FreshURL?, DownloadError>) -> Void
    ) -> Bool {
        guard let refresher else { return false }
        let (url, destination, status) = (question.url, question.destination, question.cause.httpStatus ?? 0)
        let urlForErrors = question.urlForErrors
        Task {
            let result: Result<SchedulerSettings.FreshURL?, DownloadError>
            do {
                result = .success(try await refresher(id, url, destination, status))
            } catch {
                result = .failure(
                    DownloadError(
                        code: .httpStatus,
                        url: urlForErrors,
                        httpStatus: status,
                        detail: "the URL refresher failed: \(error)"
                    )
                )
            }
            answer(result)
        }
        return true
    }

    /// What the transfer is told of the refresher's answer: the fresh URL (checked as any request's
    /// URL and headers), or that there is none, or why it cannot be used; with the URL and headers
    /// this process keeps for the download's later attempts (rows hold URLs without credentials and
    /// header names only), when it moves.
    static func input(
        for result: Result<SchedulerSettings.FreshURL?, DownloadError>
    ) -> (input: TransferInput, kept: (url: URL, headers: [DownloadHeader]?)?) {
        let fresh: SchedulerSettings.FreshURL
        switch result {
        case .success(let answer?): fresh = answer
        case .success(nil): return (.urlRefused(nil), nil)
        case .failure(let error): return (.urlRefused(error), nil)
        }
        do throws(DownloadError) {
            let url = try RequestRules.checkedURL(fresh.url)
            try DownloadHeader.check(fresh.headers ?? [], url: url.redactedString)
            return (.freshURL(url, headers: fresh.headers), (url, fresh.headers))
        } catch {
            return (.freshURLRejected(error), nil)
        }
    }
}
