import FoundationEssentials
import HaulTransfer
import HaulValues

/// Fresh URLs for expired ones: the application's URL refresher (``SchedulerSettings/freshURL``)
/// is asked off the loop when a download's URL answers 401, 403 or 410, and the transfer moves to
/// the URL it gives (``Transfer/move(to:after:counted:)``), or goes on as the failure says.
extension Scheduler {
    /// Asks the hook for a fresh URL for `transfer`, which holds its slot meanwhile (paused or
    /// cancelled like any admitted download).
    func askForFreshURL(for transfer: Transfer, _ question: FreshURLQuestion) {
        guard let refresher = settings.freshURL else {
            perform(transfer.apply(.urlRefused(nil)), for: transfer)
            return
        }
        let (url, destination, status) = (question.url, question.destination, question.cause.httpStatus ?? 0)
        let (id, token, inbox, urlForErrors) = (transfer.id, ObjectIdentifier(transfer), inbox, question.urlForErrors)
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
            inbox.submit(.urlRefreshed(id, token, result))
        }
    }

    /// The hook answered: the transfer moves to the fresh URL (checked as any request's), or goes
    /// on as the failure that made it ask says. An answer for a transfer that is gone is dropped.
    func urlRefreshed(
        _ id: DownloadID,
        for token: ObjectIdentifier,
        _ result: Result<SchedulerSettings.FreshURL?, DownloadError>
    ) {
        guard let transfer = transfer(id, token: token) else { return }
        let fresh: SchedulerSettings.FreshURL
        switch result {
        case .success(let answer?):
            fresh = answer
        case .success(nil):
            perform(transfer.apply(.urlRefused(nil)), for: transfer)
            return
        case .failure(let error):
            perform(transfer.apply(.urlRefused(error)), for: transfer)
            return
        }
        let url: URL
        do throws(DownloadError) {
            url = try RequestRules.checkedURL(fresh.url)
            try DownloadHeader.check(fresh.headers ?? [], url: url.redactedString)
        } catch {
            perform(transfer.apply(.freshURLRejected(error)), for: transfer)
            return
        }
        guard let action = transfer.apply(.freshURL(url, headers: fresh.headers)) else { return }
        // Kept for this download's later attempts in this process; rows hold URLs without credentials
        // and header names only.
        pool.given.update(id) { entry in
            entry.url = url
            if let headers = fresh.headers { entry.headers = headers.isEmpty ? nil : headers }
        }
        perform(action, for: transfer)
    }
}
