/// Where a ``Transfer`` publishes its download's events: the download's ``EventHub``, which keeps
/// them for the handle's readers and hands them to the manager's feed. The transfer knows only
/// this, not how events are kept or who reads them.
package protocol DownloadEventSink: AnyObject, Sendable {
    func publish(_ event: DownloadEvent)
}

extension EventHub: DownloadEventSink {}
