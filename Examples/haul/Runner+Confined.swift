import Haul

extension Runner {
    /// A name the list's author wrote (`out=`) goes through no link out of `folder`, nor through one
    /// another user planted there: checked now, and again when the file is placed
    /// (``DownloadRequest/confinedTo``), so that a link planted in between is not followed either.
    ///
    /// `resolvedFolder`: where `folder` is (``ConfinedPath/resolved(_:)``), when the caller knows.
    static func confine(
        _ request: inout DownloadRequest,
        out: String?,
        in folder: String,
        resolvedFolder: String? = nil,
        workingDirectory: String?
    ) throws(DownloadError) {
        guard let out else { return }
        let escape =
            resolvedFolder.map { ConfinedPath.escape(out, inResolved: $0) } ?? ConfinedPath.escape(out, in: folder)
        if let escape {
            throw DownloadError(
                code: .unsupportedDestination,
                url: DownloadRequest.redacted(request.url),
                path: request.destination.path,
                detail: "out=\(out) \(escape)"
            )
        }
        request.confinedTo = absolute(folder, in: workingDirectory)
    }
}
