import CHaul
import FoundationEssentials
import Glibc

/// Where a finished file came from and which version it is, kept on the file itself in extended
/// attributes, so that a file whose journal row is gone (the state folder deleted, zeroed, its WAL
/// lost) is not taken for someone else's: asked for again from the same URL, it is checked against
/// the server with a conditional request (its ETag, else its Last-Modified) instead of being fetched
/// again as `name.1`. As `curl --xattr` and `wget --xattr` do, the URL goes to
/// `user.xdg.origin.url` (the freedesktop.org name file managers show), here without its user name,
/// password, query and fragment (a signed link's signature would travel with every copy of the
/// file); the version goes to `user.haul.version`: the whole URL's hash, the validators and the
/// length. Why extended attributes rather than the modification time (wget's default): see
/// CHOICES.md. Best effort: a file system without user attributes (or one full) records nothing, and
/// such a file is treated as today, a file Haul does not know.
package struct FileOrigin: Equatable, Sendable {
    /// The URL the file came from (credentials removed, query kept: only its hash is written), or,
    /// read back from a file, that hash: it is made on the disk lane that writes it, not on the loop
    /// that makes the origin.
    private let source: Source
    private enum Source: Equatable, Sendable {
        case url(String)
        case hash(String)
    }
    package var entityTag: String?
    package var lastModified: String?
    package var length: Int64
    /// The file's modification time when it was written (``PlacedFile/modificationTime(of:)``): a
    /// file edited since, even to the same length, is not the one recorded.
    package var modificationTime: Double?

    package init(url: String, entityTag: String?, lastModified: String?, length: Int64) {
        self.init(source: .url(url), entityTag: entityTag, lastModified: lastModified, length: length)
    }

    private init(source: Source, entityTag: String?, lastModified: String?, length: Int64) {
        (self.source, self.entityTag, self.lastModified, self.length) = (source, entityTag, lastModified, length)
    }

    /// The hash the URL is recorded by.
    private var urlHash: String {
        switch source {
        case .url(let url): Self.hash(url)
        case .hash(let hash): hash
        }
    }

    package static let urlAttribute = "user.xdg.origin.url"
    package static let versionAttribute = "user.haul.version"

    /// Whether it names a version a server can be asked about.
    package var hasValidator: Bool { entityTag != nil || lastModified != nil }

    /// Writes the attributes on the open file `descriptor` (before it is placed: it arrives with
    /// them), which `status` describes (its modification time is recorded). Failures are ignored:
    /// the file is whole either way.
    package func record(on descriptor: Int32, status: stat) {
        guard hasValidator, case .url(let url) = source else { return }
        var written = self
        written.modificationTime = PlacedFile.modificationTime(of: status)
        Self.set(Self.urlAttribute, Self.shown(url), on: descriptor)
        Self.set(Self.versionAttribute, written.encoded, on: descriptor)
    }

    /// What the file at `path` (a regular file, followed through links as the destination is)
    /// records, or `nil`.
    package static func read(at path: String) -> FileOrigin? {
        attribute(versionAttribute, at: path).flatMap(FileOrigin.init(decoding:))
    }

    /// The extended attribute `name` of the file at `path` as text, or `nil`.
    package static func attribute(_ name: String, at path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = getxattr(path, name, &buffer, buffer.count)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    /// Whether it records the file `url` names (credentials removed) as `file` is: its length, and
    /// its modification time when one was recorded.
    package func describes(url: String, file: PlacedFile) -> Bool {
        PlacedFile.isIntact(file, length: length, modificationTime: modificationTime) && hasValidator
            && Self.hash(url) == urlHash
    }

    // MARK: - Encoding

    /// `v1`, then `url-sha256=`, `etag=`, `last-modified=`, `length=`, `mtime=` lines (header values
    /// hold no line breaks).
    private var encoded: String {
        // One string grown in place: an array of interpolated lines joined made ten allocations a
        // file (counted by Benchmarks/counts.sh), on the disk lane of every download.
        var text = "v1\nurl-sha256="
        text.reserveCapacity(256)
        text += urlHash
        if let entityTag {
            text += "\netag="
            text += entityTag
        }
        if let lastModified {
            text += "\nlast-modified="
            text += lastModified
        }
        text += "\nlength="
        text += String(length)
        if let modificationTime {
            text += "\nmtime="
            text += modificationTime.description
        }
        return text
    }

    private init?(decoding text: String) {
        var fields: [Substring: Substring] = [:]
        let lines = text.split(separator: "\n")
        guard lines.first == "v1" else { return nil }
        for line in lines.dropFirst() {
            guard let equals = line.firstIndex(of: "=") else { return nil }
            fields[line[..<equals]] = line[line.index(after: equals)...]
        }
        guard let hash = fields["url-sha256"], let length = fields["length"].flatMap({ Int64($0) }) else { return nil }
        // The URL itself is not stored: its hash stands for it (``describes(url:file:)``).
        self.init(
            source: .hash(String(hash)),
            entityTag: fields["etag"].map(String.init),
            lastModified: fields["last-modified"].map(String.init),
            length: length
        )
        modificationTime = fields["mtime"].flatMap { Double($0) }
    }

    /// The hash a URL is recorded by: its SHA-256 in lowercase hexadecimal.
    private static func hash(_ url: String) -> String {
        var text = url
        return text.withUTF8 { bytes in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { digest in
                guard CHaul_sha256(bytes.baseAddress, bytes.count, digest.baseAddress) == 1 else { return "" }
                return Hexadecimal.lowercase(digest)
            }
        }
    }

    /// The URL as `user.xdg.origin.url` shows it: without query and fragment.
    private static func shown(_ url: String) -> String {
        guard let end = url.firstIndex(where: { $0 == "?" || $0 == "#" }) else { return url }
        return String(url[..<end])
    }

    private static func set(_ name: String, _ value: String, on descriptor: Int32) {
        var value = value
        // Through withCString: a String handed straight to a C string parameter is copied first.
        _ = name.withCString { name in value.withUTF8 { fsetxattr(descriptor, name, $0.baseAddress, $0.count, 0) } }
    }
}
