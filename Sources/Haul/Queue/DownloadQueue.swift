import FoundationEssentials
import Glibc
import HaulIO
import HaulScheduler
import HaulValues
import Tracing

/// The queue's policy, between the facade (``DownloadManager``) and the journals: checks a caller's
/// request, resolves its destination, id and state directory, writes the row it asks for (a new one,
/// or an existing row queued again, kept waiting, or found complete), shows the outcome on the
/// download's handle, and tells the loop that rows were queued. Any thread: each row is written under
/// its journal's lock.
final class DownloadQueue: Sendable {
    let catalog: Catalog
    let inbox: CommandInbox<SchedulerCommand>
    /// Writes rows at once, from the loop's own thread (the scheduler's ``Scheduler/writeRows(_:)``).
    let writeNow: @Sendable (RowWrite) -> Void
    /// The configured state directory's standardized path.
    let configuredStateDirectory: String?
    /// Whether a complete file asked for again is revalidated.
    let revalidatesCompletedFiles: Bool
    /// Whether a file found with no row, recording this URL's download, is checked rather than fetched.
    let recognizesPlacedFiles: Bool

    /// - Parameters:
    ///   - stateDirectory: the configured state directory, as a path through the link it may be
    ///     (`nil`: a `.haul` beside each destination).
    ///   - revalidatesCompletedFiles, recognizesPlacedFiles: the manager's settings of those names.
    init(
        stateDirectory: String?,
        revalidatesCompletedFiles: Bool,
        recognizesPlacedFiles: Bool,
        catalog: Catalog,
        inbox: CommandInbox<SchedulerCommand>,
        writeNow: @escaping @Sendable (RowWrite) -> Void
    ) {
        self.catalog = catalog
        self.inbox = inbox
        self.writeNow = writeNow
        self.configuredStateDirectory = stateDirectory
        self.revalidatesCompletedFiles = revalidatesCompletedFiles
        self.recognizesPlacedFiles = recognizesPlacedFiles
    }

    /// See ``DownloadManager/download(_:)``.
    func download(_ asked: DownloadRequest) throws(HaulValues.DownloadError) -> Download {
        let request = try prepare(asked)
        guard !catalog.isShutDown else {
            throw HaulValues.DownloadError(code: .shutdown, url: request.url.redactedString)
        }
        do {
            _ = try catalog.journal(for: request.stateDirectory)
        } catch {
            var error = error
            error.url = request.url.redactedString
            let download = makeHandle(
                for: request,
                progress: HaulValues.DownloadProgress(bytesReceived: 0, totalBytes: nil)
            )
            download.hub.publish(.failed(error))
            return Download.of(download)
        }
        let context = ServiceContext.current
        if asked.hasUniqueID, request.stateDirectory == Journal.inMemoryKey {
            return try handOff(request, context: context)
        }
        // One transaction, the loop's: another process asking for it meanwhile finds it queued and
        // follows it, or queues it first and is followed.
        do {
            return try onLoop(request.stateDirectory) { [self] writing, reply throws(HaulValues.DownloadError) in
                var rowsExist = false
                let outcome = try writeRow(for: request, context: context, in: &writing, rowsExist: &rowsExist)
                reply.set(Download.of(publish(outcome, for: request, in: writing.journal, creatingHandle: true)!))
                note(outcome, of: request.id, in: &writing)
            }
        } catch {
            var error = error
            if error.url == nil { error.url = request.url.redactedString }
            throw error
        }
    }

    /// A request whose id is its own and whose row is in memory (a body into memory or discarded, a
    /// stream's pipe): no other request shares its row, and none is durable, so the caller does not
    /// wait for it. Its handle is made here and travels with the request: the loop keeps it with the
    /// others (``Catalog/handle(_:make:)``), writes its row and publishes it queued, or fails it with
    /// why.
    private func handOff(_ request: PreparedRequest, context: ServiceContext?) throws(HaulValues.DownloadError)
        -> Download
    {
        let live = makeHandle(for: request, progress: HaulValues.DownloadProgress(bytesReceived: 0, totalBytes: nil))
        let url = request.url.redactedString
        let command = RowWrite(
            directory: request.stateDirectory,
            write: { [self] writing throws(HaulValues.DownloadError) in
                var rowsExist = false
                let outcome = try writeRow(for: request, context: context, in: &writing, rowsExist: &rowsExist)
                _ = publish(outcome, for: request, in: writing.journal, creatingHandle: true, made: live)
                note(outcome, of: request.id, in: &writing)
            },
            answer: { error in
                guard var error else { return }
                if error.url == nil { error.url = url }
                live.hub.publish(.failed(error))
            }
        )
        try send(command, url: url)
        return Download.of(live)
    }

    /// Has the loop write rows (``RowWrite``): sends the requests whole, or writes them at once on
    /// the loop's own thread, and waits until they are durable: the value `write` set.
    ///
    /// - Throws: what writing failed with; `.shutdown` once the manager shut down.
    func onLoop<Value: Sendable>(
        _ directory: String,
        _ write: @escaping @Sendable (inout RowWriting, Reply<Value>) throws(HaulValues.DownloadError) -> Void
    ) throws(HaulValues.DownloadError) -> Value {
        let reply = Reply<Value>()
        let command = RowWrite(
            directory: directory,
            write: { writing throws(HaulValues.DownloadError) in try write(&writing, reply) },
            answer: { reply.answer($0) }
        )
        try send(command, url: nil)
        return try reply.wait()
    }

    /// Sends `command` to the loop, or writes it at once on the loop's own thread.
    ///
    /// - Throws: `.shutdown` (naming `url`) once the manager shut down.
    private func send(_ command: RowWrite, url: String?) throws(HaulValues.DownloadError) {
        if catalog.feed.isOnLoopThread || inbox.adoptCallingThreadIfEmbedded() {
            writeNow(command)
        } else if !inbox.submit(.writeRows(command)) {
            throw HaulValues.DownloadError(code: .shutdown, url: url)
        }
    }

    /// What the loop does next for a row written: admit from the queue, or follow another manager's.
    func note(_ outcome: QueueOutcome, of id: HaulValues.DownloadID, in writing: inout RowWriting) {
        switch outcome {
        case .queued: writing.markQueued()
        case .following(let record): writing.follow(id, record)
        case .waiting, .complete: break
        }
    }

    /// The downloads that have not reached a final state, in every open journal.
    var unfinishedDownloads: [Download] {
        lookOnLoop { [self] in
            catalog.openJournals.flatMap { journal in
                ((try? journal.unfinishedRecords()) ?? []).compactMap { id, _ in attach(id, in: journal) }
            }
        } ?? []
    }

    /// The unfinished download with this id, in an open journal.
    func download(id: HaulValues.DownloadID) -> Download? {
        // On the loop, which keeps the handles.
        lookOnLoop { [self] in
            if let live = catalog.existingHandle(id), !live.hub.isClosed { return Download.of(live) }
            for journal in catalog.openJournals {
                if let found = attach(id, in: journal) { return found }
            }
            return nil
        } ?? nil
    }

    /// Runs `look` on the loop (``SchedulerCommand/run(_:)``), where the rows are written, and waits
    /// for what it found; `nil` once the manager shut down.
    func lookOnLoop<Value: Sendable>(_ look: @escaping @Sendable () -> Value) -> Value? {
        if catalog.feed.isOnLoopThread || inbox.adoptCallingThreadIfEmbedded() { return look() }
        let reply = Reply<Value>()
        guard
            inbox.submit(
                .run {
                    reply.set(look())
                    reply.answer(nil)
                }
            )
        else { return nil }
        return try? reply.wait()
    }

    /// The handle of `id` if it is unfinished in `journal`: the live one, or one made from its row.
    /// On the loop: its next event for it comes after the state shown here.
    private func attach(_ id: HaulValues.DownloadID, in journal: Journal) -> Download? {
        if let live = catalog.existingHandle(id), !live.hub.isClosed { return Download.of(live) }
        guard let record = try? journal.record(for: id), record.isUnfinished, let url = URL(string: record.url)
        else { return nil }
        let request = PreparedRequest(
            url: url,
            destination: record.destination,
            id: id,
            stateDirectory: journal.directory,
            priority: record.priority
        )
        let download = publish(.waiting(record), for: request, in: journal, creatingHandle: true).map(Download.of)
        // Queued or run by another manager that runs: its outcome is followed here.
        if journal.isOwnedByAnother(id) { inbox.submit(.follow(journal.directory, [id: record])) }
        return download
    }
}
