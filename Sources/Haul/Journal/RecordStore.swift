import Foundation
import Glibc

/// What Haul remembers about one download between runs: the total length the first time it is known,
/// the validators that pin a resume to one version of the remote file, and whether it completed.
struct DownloadRecord: Codable, Equatable, Sendable {
    var url: String
    var destination: String
    var totalBytes: Int64?
    var entityTag: String?
    var lastModified: String?
    var completed = false

    /// The validator for `If-Range`: a strong ETag, else Last-Modified (RFC 9110 §13.1.5).
    var ifRangeValidator: String? {
        if let entityTag, !entityTag.hasPrefix("W/") { return entityTag }
        return lastModified
    }
}

/// Where a state directory keeps partial files and their records: `<id>.part` and `<id>.json`.
///
/// One small JSON file per download, replaced atomically (write, then rename). The durable SQLite
/// journal replaces this store; its interface is what the scheduler needs from it. Loop thread only.
struct RecordStore: Sendable {
    let directory: String

    func partialPath(for id: DownloadID) -> String { "\(directory)/\(id.rawValue).part" }
    private func recordPath(for id: DownloadID) -> String { "\(directory)/\(id.rawValue).json" }

    /// Creates the directory (and its parents) when missing.
    func prepare() throws(DownloadError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            let code = (error as NSError).userInfo[NSUnderlyingErrorKey].flatMap { ($0 as? NSError)?.code }
            throw DownloadError(
                code: .fileSystem, url: nil, errno: code.map(Int32.init) ?? EACCES, path: directory,
                detail: "could not create the state directory")
        }
    }

    /// The stored record, or `nil` when there is none or it cannot be read (then it is ignored).
    func load(_ id: DownloadID) -> DownloadRecord? {
        guard let data = FileManager.default.contents(atPath: recordPath(for: id)) else { return nil }
        return try? JSONDecoder().decode(DownloadRecord.self, from: data)
    }

    /// Replaces the stored record atomically.
    func save(_ record: DownloadRecord, for id: DownloadID) throws(DownloadError) {
        let path = recordPath(for: id)
        let temporary = path + ".tmp"
        do {
            let data = try JSONEncoder().encode(record)
            let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: temporary, detail: "open failed")
            }
            defer { close(descriptor) }
            let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written == data.count else {
                throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: temporary, detail: "write failed")
            }
            guard rename(temporary, path) == 0 else {
                throw DownloadError(code: .fileSystem, url: nil, errno: errno, path: path, detail: "rename failed")
            }
        } catch let error as DownloadError {
            throw error
        } catch {
            throw DownloadError(code: .internalError, url: nil, detail: "could not encode the download record")
        }
    }

    /// Forgets a download: its record and its partial file.
    func remove(_ id: DownloadID) {
        unlink(recordPath(for: id))
        unlink(partialPath(for: id))
    }
}
