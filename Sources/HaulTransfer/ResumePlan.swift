import HaulValues

/// How a request treats the bytes already in the partial file. Pure: unit-tested without I/O.
///
/// A partial file is continued only when something proves that its bytes are the remote file's
/// current ones. A strong validator sent in `If-Range` proves it: the server answers 206 only if the
/// file is the same, and sends the whole file otherwise. Without one (no ETag and no Last-Modified,
/// a weak ETag, or a Last-Modified too close to the response's Date), a `Range` alone would splice
/// a replaced file onto the old bytes. So the partial starts over, unless the caller opted in to
/// unvalidated resumes. Then the request asks for a stretch before the resume point again and
/// compares it with the bytes on disk, and checks the total length.
enum ResumePlan: Equatable, Sendable {
    /// Ask for the bytes from `offset` on (nothing from 0), with `If-Range: validator` when above 0.
    case resume(from: Int64, ifRange: String?)
    /// Ask for the whole file, which replaces the partial once an answer is accepted (a failing
    /// server leaves the partial as it is): nothing proves its bytes.
    case restart(RestartReason)
    /// Ask from `rangeStart` (before the partial's end), with `If-Range: ifRange` when there is a
    /// validator, and accept the answer only if its first `offset - rangeStart` bytes are the
    /// partial's last ones.
    case verify(rangeStart: Int64, offset: Int64, ifRange: String? = nil)

    /// How much before the resume point an unvalidated resume asks for again, at most: 64 KiB, or
    /// half the partial when it is shorter (so that the request still asks for a range).
    static let overlapLength: Int64 = 64 * 1024

    /// - Parameters:
    ///   - offset: the partial file's length (its bytes, buffered ones included).
    ///   - validator: the row's strong validator (``JournalRow/ifRangeValidator``), if any.
    ///   - resumesWithoutValidator: the caller's opt-in to resuming without one.
    ///   - continuesRange: the length of the answer before, when the request asks for the rest after
    ///     a range that ended before the file, in this attempt (a server that caps its answers): the
    ///     overlap is checked even without the opt-in, since starting over would only meet the same
    ///     cap again, and is at most a quarter of that length, so that each answer still brings
    ///     three quarters of new bytes.
    ///   - decodesBodies: bodies are decoded, so the partial's bytes are not the ones ranges count.
    ///   - urlChanged: the request goes to another URL than the one whose answer wrote the partial (a
    ///     refreshed link, a mirror): a validator alone is not trusted across URLs (nginx's ETag, for
    ///     one, is the file's mtime and size, which two different files may share), so the overlap is
    ///     checked too.
    ///   - ifRangeIgnored: the host ignores `If-Range` (``IfRangeForm/plainRange``), so a plain `Range`
    ///     is sent, which the server answers with whatever version it has now; one that kept its ETag
    ///     over new bytes (a broken origin, a cache in front of one) carries the pinned validator too.
    ///     So the overlap is checked, as across URLs: continuity proven by bytes.
    static func decide(
        offset: Int64,
        validator: String?,
        resumesWithoutValidator: Bool,
        continuesRange: Int64? = nil,
        decodesBodies: Bool = false,
        urlChanged: Bool = false,
        ifRangeIgnored: Bool = false
    ) -> ResumePlan {
        if decodesBodies, offset > 0 { return .restart(.decodedBody) }
        guard offset > 1 else { return offset == 0 ? .resume(from: 0, ifRange: nil) : .restart(.noValidator) }
        let overlap = min(overlapLength, offset / 2, continuesRange.map { max(1, $0 / 4) } ?? overlapLength)
        if let validator {
            return urlChanged || ifRangeIgnored
                ? .verify(rangeStart: offset - overlap, offset: offset, ifRange: validator)
                : .resume(from: offset, ifRange: validator)
        }
        guard resumesWithoutValidator || continuesRange != nil else { return .restart(.noValidator) }
        return .verify(rangeStart: offset - overlap, offset: offset)
    }
}
