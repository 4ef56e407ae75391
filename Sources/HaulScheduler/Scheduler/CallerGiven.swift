import FoundationEssentials
import HaulIO
import HaulTransfer
import HaulValues
import Logging
import Tracing

/// What a request asked for in this process gives that its journal row does not hold. Memory only;
/// gone with the process.
package struct CallerGiven: Sendable {
    /// A URL with a user name or password (rows hold URLs without them), or a new URL for an
    /// unfinished download (its row keeps the URL its bytes came from until the new one answers).
    var url: URL?
    /// Header values (rows hold their names; a later process asks
    /// ``SchedulerSettings/headerProvider``).
    var headers: [DownloadHeader]?
    /// The URLs of a download with mirrors, when one has a user name or password.
    var urls: [URL]?
    /// The logger its request came with (``DownloadRequest/logger``).
    var logger: Logger?
    /// The caller's service context when it asked (its trace): the parent of the download's spans.
    var context: ServiceContext?
    /// The stream its body goes to (a device, a FIFO, standard output), open for this process.
    package internal(set) var stream: StreamTarget?
    /// Its request continues a file Haul did not download (``DownloadRequest/continuesExistingFile``),
    /// or its bytes are a partial file adopted from a journal that is gone: they are proven by the
    /// overlap before they are continued.
    var provesByOverlap = false
    /// The folder its name must stay inside (``DownloadRequest/confinedTo``).
    var confinedTo: String?

    /// What the latest request for a download gives (its URL and mirrors kept only when they carry a
    /// user name or password, its headers only when it has some).
    package init(
        url: URL,
        headers: [DownloadHeader],
        urls: [URL],
        logger: Logger?,
        context: ServiceContext?,
        stream: StreamTarget?,
        provesByOverlap: Bool,
        confinedTo: String?
    ) {
        self.url = url.hasCredentials ? url : nil
        keep(headers: headers)
        self.urls = urls.contains(where: \.hasCredentials) ? urls : nil
        self.logger = logger
        self.context = context
        self.stream = stream
        self.provesByOverlap = provesByOverlap
        self.confinedTo = confinedTo
    }

    init() {}

    /// Keeps `headers` for the download's later attempts in this process (none kept when empty).
    mutating func keep(headers: [DownloadHeader]) {
        self.headers = headers.isEmpty ? nil : headers
    }

    var isEmpty: Bool {
        url == nil && headers == nil && urls == nil && logger == nil && context == nil && stream == nil
            && !provesByOverlap && confinedTo == nil
    }
}

/// What callers gave for the downloads of this process, by id: the loop's own (written when the loop
/// writes a request's row, read when it admits the row, dropped when the download ends). No lock.
struct CallerGivenTable {
    private var byID: [DownloadID: CallerGiven] = [:]

    subscript(id: DownloadID) -> CallerGiven? { byID.isEmpty ? nil : byID[id] }

    /// Changes what is kept for `id` (an entry left empty goes).
    mutating func update(_ id: DownloadID, _ change: (inout CallerGiven) -> Void) {
        var entry = byID[id] ?? CallerGiven()
        change(&entry)
        byID[id] = entry.isEmpty ? nil : entry
    }

    /// Sets or drops what is kept for `id`.
    mutating func set(_ given: CallerGiven?, for id: DownloadID) {
        byID[id] = given.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Forgets what was kept for a download that ended.
    mutating func forget(_ id: DownloadID) {
        if !byID.isEmpty { byID[id] = nil }
    }

    /// What a transfer of the claimed `record` is made from: the row (taken whole, not copied) with
    /// what this process keeps beyond it. `nil` when neither keeps a readable URL.
    func request(for id: DownloadID, record: consuming JournalRow, rowID: Int64?) -> TransferRequest? {
        let kept = self[id]
        // The row's URL has no user name or password; one asked for with them in this process has them.
        guard let url = kept?.url ?? URL(string: record.url) else { return nil }
        return TransferRequest(
            record: record,
            rowID: rowID,
            url: url,
            mirrors: record.mirrors.isEmpty ? [] : kept?.urls ?? record.mirrors.compactMap { URL(string: $0) },
            headers: kept?.headers,
            logger: kept?.logger,
            context: kept?.context,
            stream: kept?.stream,
            provesByOverlap: kept?.provesByOverlap ?? false,
            confinedTo: kept?.confinedTo
        )
    }
}
