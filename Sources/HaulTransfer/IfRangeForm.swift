/// How a resume pins its range to the version on disk (RFC 9110 §13.1.5), and what a host showed it
/// honours. Pure.
///
/// Some CDNs answer a `Range` with an ETag `If-Range` by the whole file (`200`) although the ETag
/// matches, and honour the same range with the Last-Modified date as `If-Range`, or with no
/// `If-Range` at all. A `200` that carries the pinned ETag to such a request is that, not a new
/// version: the transfer stops it after its first bytes and asks again in the next form
/// (``next(hasStrongDate:)``), and remembers the form per host (``TransferEnvironment``), so that later
/// resumes there ask in the form that works. A plain range's `206` proves its version only by carrying
/// the pinned validator (``ResponseDecision``).
enum IfRangeForm: Equatable, Sendable {
    /// `If-Range` with the strong ETag (or, without one, the strong date): the default.
    case validator
    /// `If-Range` with the Last-Modified date, though the file has a strong ETag.
    case date
    /// No `If-Range`: the `206` must carry the pinned validator itself.
    case plainRange

    /// The form to try after this one was answered by the whole file with the pinned validator;
    /// `nil` when none is left (the server ignores ranges).
    func next(hasStrongDate: Bool) -> IfRangeForm? {
        switch self {
        case .validator: hasStrongDate ? .date : .plainRange
        case .date: .plainRange
        case .plainRange: nil
        }
    }

    /// The `If-Range` value this form sends for a row pinned so: `nil` for none.
    func value(entityTag: String?, lastModified: String?, lastModifiedIsStrong: Bool) -> String? {
        let pin = PinnedVersion(
            entityTag: entityTag,
            lastModified: lastModified,
            lastModifiedIsStrong: lastModifiedIsStrong
        )
        switch self {
        case .validator: return pin?.value
        case .date: return lastModifiedIsStrong ? lastModified : nil
        case .plainRange: return nil
        }
    }
}
