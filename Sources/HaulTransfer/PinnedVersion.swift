import HaulIO

/// The version of a file that a download's bytes are pinned to: the strong validator its row holds (a
/// strong ETag, else a strong Last-Modified), and what an answer says of it. Pure: unit-tested without
/// I/O.
///
/// An answer is taken for another version of the file only on evidence as strong as the pin: a
/// different strong ETag where the pin is an ETag, a different Last-Modified where it is a date. An
/// answer without that validator proves nothing: an overloaded server's or load balancer's error page
/// sent as `200 OK`, a cache's stripped copy. It is a failed attempt (``Match/unproven``), retried with
/// a backoff, and never replaces the bytes on disk.
struct PinnedVersion: Equatable, Sendable {
    enum Kind: Equatable, Sendable {
        case entityTag
        case lastModified
    }

    /// What an answer's validators say of the pinned version.
    enum Match: Equatable, Sendable {
        /// The pinned validator: the same version.
        case same
        /// A validator of the pin's kind with another value: another version.
        case other
        /// No validator of the pin's kind (or only a weak ETag): nothing proves which version it is.
        case unproven
    }

    let kind: Kind
    let value: String

    /// The pin of a row's validators: a strong ETag, else a strong Last-Modified; `nil` for neither.
    init?(entityTag: String?, lastModified: String?, lastModifiedIsStrong: Bool) {
        if let entityTag, !entityTag.hasPrefix("W/") {
            (kind, value) = (.entityTag, entityTag)
        } else if lastModifiedIsStrong, let lastModified {
            (kind, value) = (.lastModified, lastModified)
        } else {
            return nil
        }
    }

    /// What an answer with these validators is, against the pin.
    func match(entityTag: String?, lastModified: String?) -> Match {
        switch kind {
        case .entityTag:
            guard let entityTag, !entityTag.hasPrefix("W/") else { return .unproven }
            return entityTag == value ? .same : .other
        case .lastModified:
            guard let lastModified else { return .unproven }
            return lastModified == value ? .same : .other
        }
    }

    /// What `head` is against the pin: ``match(entityTag:lastModified:)``, with a file server's
    /// whole answer for another version that names it only weakly taken for another version
    /// (``ResponseHead/namesAnotherVersionWeakly(than:)``).
    func match(_ head: ResponseHead) -> Match {
        let match = match(entityTag: head.entityTag, lastModified: head.lastModified)
        return match == .unproven && head.namesAnotherVersionWeakly(than: self) ? .other : match
    }

    /// Why an answer that names no version of its own (or, `namesVersion`, another version but no
    /// length) cannot stand for the file, for errors.
    static func unprovenDetail(kind: Kind, contentType: String?, length: Int64?, namesVersion: Bool = false) -> String {
        let what = [contentType, length.map { "\($0) bytes" }].compactMap { $0 }.joined(separator: ", ")
        let answer = "the answer\(what.isEmpty ? "" : " (\(what))")"
        if namesVersion {
            return "\(answer) names another version of the file but not its length: nothing proves it is the "
                + "whole file rather than an error page"
        }
        let missing = kind == .entityTag ? "no strong ETag" : "no Last-Modified"
        return "\(answer) carries \(missing), where the file has one: an error page or another resource, not the file"
    }
}

extension JournalRow {
    /// The version its partial's bytes are pinned to, if any (see ``PinnedVersion``).
    var pinnedVersion: PinnedVersion? {
        PinnedVersion(entityTag: entityTag, lastModified: lastModified, lastModifiedIsStrong: lastModifiedIsStrong)
    }
}
