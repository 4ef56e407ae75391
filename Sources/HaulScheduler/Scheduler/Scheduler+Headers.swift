import FoundationEssentials
import HaulTransfer
import HaulValues

/// Header values of downloads restored from the journal (which holds their names only): asked of
/// the application's header provider (``SchedulerSettings/headerValues``) off the loop, or the download
/// fails with `.headersUnavailable`; it is never sent without them.
extension Scheduler {
    /// Asks the provider for the headers of an admitted transfer, which waits in its slot (its
    /// machine's `awaitingHeaders`: paused or cancelled meanwhile like any admitted download); fails
    /// it when there is no provider.
    func askForHeaders(of transfer: Transfer, _ question: HeadersQuestion) {
        let names = question.names
        let listed = names.map { "'\($0)'" }.joined(separator: ", ")
        guard let provider = settings.headerValues else {
            let error = DownloadError(
                code: .headersUnavailable,
                url: question.urlForErrors,
                detail: "it was queued with the headers \(listed), whose values this process was not given"
            )
            perform(transfer.apply(.headers(.failure(error))), for: transfer)
            return
        }
        let (url, destination) = (question.url, question.destination)
        let (id, token, inbox, urlForErrors) = (transfer.id, ObjectIdentifier(transfer), inbox, question.urlForErrors)
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
            inbox.submit(.headersArrived(id, token, result))
        }
    }

    /// The provider answered: the transfer sends its first request, or fails. An answer for a
    /// transfer that is gone (paused, cancelled, shut down) is dropped.
    func headersArrived(
        _ id: DownloadID,
        for token: ObjectIdentifier,
        _ result: Result<[DownloadHeader], DownloadError>
    ) {
        guard let transfer = transfer(id, token: token), let action = transfer.apply(.headers(result)) else { return }
        if case .success(let headers) = result {
            // Kept for its retries and resumes in this process, as if it had been asked for with them.
            pool.given.update(id) { $0.headers = headers.isEmpty ? nil : headers }
        }
        perform(action, for: transfer)
    }

    /// The transfer of `id` if it is still the one a hook's answer was asked for (`token`, its
    /// `ObjectIdentifier`): a later transfer of the same download does not take an earlier's answer.
    func transfer(_ id: DownloadID, token: ObjectIdentifier) -> Transfer? {
        guard let transfer = admitted(id), ObjectIdentifier(transfer) == token else { return nil }
        return transfer
    }
}
