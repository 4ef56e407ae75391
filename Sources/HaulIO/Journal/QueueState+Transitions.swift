/// The queue row's state machine: the one place where a row's state changes.
extension QueueState {
    /// What `event` does to a row in this state. Pure: the journal, the queue and the loop apply
    /// the answer (through ``JournalRow/apply(_:)``), and the SQL that changes many rows at once
    /// is derived from it (``sqlCondition(accepting:to:)``).
    func after(_ event: QueueEvent) -> QueueTransition {
        switch (event, self) {
        case (.requested, .paused), (.requested, .interrupted), (.requested, .failed), (.requested, .cancelled):
            .moves(to: .queued)
        case (.requested, .queued), (.requested, .waitingToRetry), (.requested, .running):
            .unchanged
        case (.revalidationRequested, .completed):
            .moves(to: .queued)
        case (.admitted, .queued), (.admitted, .waitingToRetry):
            .moves(to: .running)
        case (.paused, .queued), (.paused, .waitingToRetry), (.paused, .interrupted), (.paused, .running):
            .moves(to: .paused)
        case (.resumed, .paused), (.resumed, .interrupted):
            .moves(to: .queued)
        case (.cancelled, .queued), (.cancelled, .waitingToRetry), (.cancelled, .paused),
            (.cancelled, .interrupted), (.cancelled, .running):
            .moves(to: .cancelled)
        case (.progressed, .running):
            .moves(to: .running)
        case (.completed, .running):
            .moves(to: .completed)
        case (.retryScheduled, .running):
            .moves(to: .waitingToRetry)
        case (.failed, .running):
            .moves(to: .failed)
        case (.interrupted, .queued), (.interrupted, .waitingToRetry), (.interrupted, .running):
            .moves(to: .interrupted)
        case (.continued, .interrupted):
            .moves(to: .queued)
        default:
            .refused
        }
    }
}

extension JournalRow {
    /// Applies `event` to the row: its state and what goes with it (the queue's order, the retry's
    /// time, the last error, revalidation). Returns what the event did; when it is `.refused` or
    /// `.unchanged` the record is as it was. A cancel forgets what was fetched (length, validators,
    /// bytes, segments, a chosen name): the caller removes the partial file.
    @discardableResult
    package mutating func apply(_ event: QueueEvent) -> QueueTransition {
        let transition = state.after(event)
        guard case .moves(let next) = transition else { return transition }
        switch event {
        case .requested(let sequence), .resumed(let sequence):
            queueSequence = sequence
            lastError = nil
            retryAt = 0
        case .revalidationRequested(let sequence):
            queueSequence = sequence
            revalidate = true
        case .admitted, .paused:
            retryAt = 0
        case .retryScheduled(let time, let error):
            retryAt = time
            lastError = error
        case .failed(let error):
            lastError = error
        case .completed:
            revalidate = false
        case .cancelled:
            self = restarted
        case .progressed, .interrupted, .continued:
            break
        }
        // An interrupted download that was waiting to retry still waits for its time.
        state = next == .queued && retryAt > 0 ? .waitingToRetry : next
        return transition
    }
}
