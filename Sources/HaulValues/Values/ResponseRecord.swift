import FoundationEssentials

/// What the server said of the file in the last response whose body a download accepted, as the loop
/// records it (the facade's public `DownloadResponse` says what each field means).
package struct ResponseRecord: Sendable, Hashable {
    package var url: URL
    package var status: Int
    package var contentType: String?
    package var entityTag: String?
    package var lastModified: String?
    package var totalBytes: Int64?
    /// Every header of the response, in the order sent, for a body in memory
    /// (``DownloadManager/data(from:headers:maximumSize:)``) and a stream
    /// (``DownloadManager/stream(from:headers:bufferLimit:)``); empty for a file, whose download
    /// keeps only what resuming needs (the fields above), and for a discarded body. A `Set-Cookie`'s value, and any other
    /// sensitive one (``DownloadHeader/isSensitive``), is kept but never printed. Made from the
    /// response each time it is read: keep the array rather than read it again in a loop.
    package var headers: [DownloadHeader] {
        get {
            switch storedHeaders {
            case .made(let headers): headers
            case .packed(let packed): packed.unpacked()
            }
        }
        set { storedHeaders = .made(newValue) }
    }

    /// The headers as given, or as the loop packed them (made into values when read).
    private enum StoredHeaders: Sendable {
        case made([DownloadHeader])
        case packed(PackedHeaders)
    }
    private var storedHeaders: StoredHeaders

    package init(
        url: URL,
        status: Int,
        contentType: String? = nil,
        entityTag: String? = nil,
        lastModified: String? = nil,
        totalBytes: Int64? = nil,
        headers: [DownloadHeader] = []
    ) {
        self.url = url
        self.status = status
        self.contentType = contentType
        self.entityTag = entityTag
        self.lastModified = lastModified
        self.totalBytes = totalBytes
        self.storedHeaders = .made(headers)
    }

    /// A response whose headers stay packed until read.
    package init(
        url: URL,
        status: Int,
        contentType: String?,
        entityTag: String?,
        lastModified: String?,
        totalBytes: Int64?,
        packedHeaders: PackedHeaders
    ) {
        self.init(
            url: url,
            status: status,
            contentType: contentType,
            entityTag: entityTag,
            lastModified: lastModified,
            totalBytes: totalBytes
        )
        if !packedHeaders.isEmpty { storedHeaders = .packed(packedHeaders) }
    }

    /// Equal when every field and every header is (packed or not).
    package static func == (left: ResponseRecord, right: ResponseRecord) -> Bool {
        left.url == right.url && left.status == right.status && left.contentType == right.contentType
            && left.entityTag == right.entityTag && left.lastModified == right.lastModified
            && left.totalBytes == right.totalBytes && left.headers == right.headers
    }

    /// Hashes every field and every header, as ``==`` compares them.
    package func hash(into hasher: inout Hasher) {
        hasher.combine(url)
        hasher.combine(status)
        hasher.combine(contentType)
        hasher.combine(entityTag)
        hasher.combine(lastModified)
        hasher.combine(totalBytes)
        hasher.combine(headers)
    }

    /// The value of the first header named `name` (compared without case), or `nil`.
    package func value(forHeader name: String) -> String? {
        headers.first { $0.name.caseInsensitiveEquals(name) }?.value
    }
}

extension String {
    /// Equal to `other` when both are lowercased (ASCII: header names are tokens).
    fileprivate func caseInsensitiveEquals(_ other: String) -> Bool {
        utf8.count == other.utf8.count && lowercased() == other.lowercased()
    }
}
