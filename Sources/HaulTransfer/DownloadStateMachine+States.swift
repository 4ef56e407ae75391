import HaulValues

/// The words of ``DownloadStateMachine``: its states, the actions it returns and how a transfer
/// that curl handed back ended. Its transitions are in `DownloadStateMachine.swift`.
extension DownloadStateMachine {
    /// How a download ended.
    enum Outcome: Equatable, Sendable {
        case completed
        indirect case failed(DownloadError)
        case cancelled
    }

    /// What a download in `closing` does once curl has let go of its transfer.
    enum Ending: Equatable, Sendable {
        /// The file is whole (an answer that said so at its head).
        case received
        /// A revalidation's answer: the complete file at the destination did not change.
        case unchanged
        indirect case fail(DownloadError)
        case restartFromZero
        /// The server ignored the range's `If-Range`: the same range is asked for again at once, in
        /// another form (not a failure, not a restart; the forms run out after two).
        case askAgain
    }

    enum State: Equatable, Sendable {
        /// Waiting for a slot. → connecting (admit), awaitingHeaders (admit without header values),
        /// paused (pause), done (cancel).
        case idle
        /// An attempt failed transiently and the download waits for its retry's time (out of its
        /// slot: the transfer ends, its row waits). → connecting or awaitingHeaders (admitted
        /// again), paused (pause), done (cancel).
        case waitingToRetry
        /// Admitted, waiting for the values of the headers its row names (the application's header
        /// provider is asked; they never reach the disk). Shown to users as connecting.
        /// → connecting (they arrived), done (none: it fails), paused, done (cancel).
        case awaitingHeaders
        /// Its URL answered 401, 403 or 410 (this error) and the application's refresh hook is asked
        /// for a fresh one. Shown to users as connecting. → connecting (a fresh URL), what the error
        /// says when none comes (another URL, a retry, the end), paused, done (cancel).
        indirect case awaitingFreshURL(DownloadError)
        /// A request is out and no response was accepted yet.
        /// → receiving (head accepted), closing (head refused), paused, done (transfer failed, cancel).
        case connecting
        /// Body bytes flow into the partial file. → finishing (transfer ended), done (transfer failed,
        /// cancel), paused, connecting (the server's range ended before the file: the rest is asked
        /// for).
        case receiving
        /// The response head decided the end, but curl still holds the transfer until it reports it
        /// finished. Shown to users as connecting. → connecting (restart), done, paused.
        case closing(Ending)
        /// No request; the partial file is kept. → done (cancel).
        case paused
        /// Every byte is received: the file is being placed off the loop (or a stream's last bytes
        /// wait for its reader). Neither paused nor cancelled (but a stream's hand-over, whose reader
        /// left). → done: completed (``placed()``), failed (``completionFailed(_:)``), cancelled
        /// (``cancelHandOver()``); waitingToRetry (``completionFailed(_:)`` on a full disk).
        case finishing
        /// Final: nothing leaves this state.
        case done(Outcome)
    }

    /// What a response's head leads to (``responseReceived(_:)``): its body written or refused,
    /// nothing else.
    enum BodyAction: Equatable, Sendable {
        /// Write the body to the partial file, truncating it first when it restarts from zero;
        /// `total` is the file's length as the response announced it.
        case accept(total: Int64?, truncatingPartial: Bool, restart: RestartReason?)
        /// Refuse the body: make curl end the transfer; ``transferEnded(_:progressed:)`` says what
        /// follows.
        case reject
    }

    /// What the owner does after any other input.
    enum Action: Equatable, Sendable {
        /// Nothing to do.
        case none
        /// Send a request for the bytes after the partial file (truncate the partial first when asked).
        case startRequest(truncatingPartial: Bool)
        /// Stop any request, write what is buffered, keep the partial file, leave the queue.
        case pause
        /// Stop any request and delete the partial file.
        case cancel
        /// Every byte of the file is received: write what is buffered and move the partial file to
        /// its destination (the download is finishing).
        case received
        /// Keep the destination as it is (the server said it did not change) and drop the partial file.
        case keepDestination
        /// Write what is buffered, keep the partial file, and report the error.
        indirect case fail(DownloadError)
        /// Stop the request, keep the partial file, and queue the download again after a delay:
        /// the failure was transient and the budget allows another attempt.
        indirect case retry(DownloadError)
        /// Send the next request to the download's next URL (a mirror), after this failure.
        indirect case tryNextURL(DownloadError)
        /// Ask the application's refresh hook for a fresh URL (this one answered 401, 403 or 410),
        /// then send the next request there (``freshURLArrived()``); ``urlRefused(_:)`` when it gives none.
        indirect case refreshURL(DownloadError)
        /// Ask the application's header provider for the values of the headers the row names;
        /// ``headersArrived()`` once they are known.
        case askForHeaders
    }

    /// How a transfer that curl handed back ended.
    enum TransferResult: Equatable, Sendable {
        /// Every byte of the answer arrived.
        case received
        /// A 206 ended where its Content-Range said, before the end of the file (a server that
        /// serves ranges of a limited size): every byte it announced arrived.
        case rangeEnded
        indirect case failed(DownloadError)
    }
}
