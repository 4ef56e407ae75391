import FoundationEssentials
import HaulIO
import HaulValues
import Logging
import Tracing

/// What a ``Transfer`` is made from, in one value: its claimed row, and what this process keeps of
/// the request beyond the row (a URL with its password, mirrors with theirs, header values, the
/// caller's logger and trace, a stream), read from the `Catalog` at once.
package struct TransferRequest {
    /// The row as it was claimed, and where it is in the journal's table.
    var record: JournalRow
    var rowID: Int64?
    /// The URL requests go to first: the one asked for in this process (with its user name and
    /// password), else the row's.
    package var url: URL
    /// The download's URLs in order, when it has mirrors.
    var mirrors: [URL]
    /// The request's own header values, when this process knows them; `nil` with names in the row:
    /// a download restored from the journal, whose values must be asked for (``needsHeaders``).
    var headers: [DownloadHeader]?
    var logger: Logger?
    var context: ServiceContext?
    var stream: StreamTarget?
    /// Bytes on disk without a validator are proven by the overlap (``DownloadRequest/continuesExistingFile``).
    var provesByOverlap: Bool = false
    /// The folder its name must stay inside when the file is placed (``DownloadRequest/confinedTo``).
    var confinedTo: String?

    package init(
        record: JournalRow,
        rowID: Int64? = nil,
        url: URL,
        mirrors: [URL],
        headers: [DownloadHeader]? = nil,
        logger: Logger? = nil,
        context: ServiceContext? = nil,
        stream: StreamTarget? = nil,
        provesByOverlap: Bool = false,
        confinedTo: String? = nil
    ) {
        self.record = record
        self.rowID = rowID
        self.url = url
        self.mirrors = mirrors
        self.headers = headers
        self.logger = logger
        self.context = context
        self.stream = stream
        self.provesByOverlap = provesByOverlap
        self.confinedTo = confinedTo
    }

    /// Its row names headers whose values this process does not have.
    package var needsHeaders: Bool { headers == nil && !record.headerNames.isEmpty }
}
