import FoundationEssentials
import Haul

/// The requests a run makes of a list's entries: URLs parsed and given their credentials,
/// destinations made absolute.
extension Runner {
    /// The request for `item` (into `folder` under the server's name, when given).
    static func request(
        for item: DownloadPlan.Item,
        _ entry: InputFile.Entry,
        into folder: String?,
        workingDirectory: String? = nil,
        credentials: Credentials = Credentials()
    ) throws(DownloadError) -> DownloadRequest {
        var request = DownloadRequest(
            url: try resolved(item.url, credentials),
            destination: URL(
                fileURLWithPath: absolute(folder ?? item.destination, in: workingDirectory),
                isDirectory: folder != nil
            ),
            checksum: entry.checksum,
            headers: entry.headers
        )
        request.takesFileNameFromServer = folder != nil
        for mirror in entry.urls.dropFirst() { request.mirrors.append(try resolved(mirror, credentials)) }
        return request
    }

    /// The URL `text` names (`http://` added when it has no scheme, as curl and wget read it).
    static func parsed(_ text: String) throws(DownloadError) -> URL {
        try DownloadRequest.url(parsing: HaulCommand.withDefaultScheme(text) ?? text, shownAs: Reporter.shown(text))
    }

    /// The URL `text` names, with the user and password `credentials` know for it.
    static func resolved(_ text: String, _ credentials: Credentials) throws(DownloadError) -> URL {
        credentials.apply(to: try parsed(text))
    }

    /// The request for `entry` with --discard: its body is counted and thrown away.
    static func discardingRequest(
        _ entry: InputFile.Entry,
        credentials: Credentials = Credentials()
    ) throws(DownloadError) -> DownloadRequest {
        var request = DownloadRequest.discarding(
            try resolved(entry.urls[0], credentials),
            headers: entry.headers
        )
        for mirror in entry.urls.dropFirst() { request.mirrors.append(try resolved(mirror, credentials)) }
        return request
    }

    /// `path` made absolute against `workingDirectory` (read once by the caller): a file URL of a
    /// relative path asks the system for the working directory each time (a `getcwd` per URL, 2 %
    /// of a rerun over 100,000). Without one, `path` as it is (the URL then asks).
    static func absolute(_ path: String, in workingDirectory: String?) -> String {
        guard let workingDirectory, path.utf8.first != UInt8(ascii: "/") else { return path }
        return workingDirectory == "/" ? "/\(path)" : "\(workingDirectory)/\(path)"
    }
}
