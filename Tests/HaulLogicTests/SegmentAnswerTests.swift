import Testing

@testable import HaulTransfer
@testable import HaulValues

/// What an answer to one segment's range is (``Segments/answer(status:contentRange:contentLength:match:total:asked:)``):
/// the one rule the transfer's own request and its other connections both judge by.
@Suite("Segment answers")
struct SegmentAnswerTests {
    let total: Int64 = 4_194_304

    private func answer(
        _ status: Int,
        range: String? = nil,
        length: Int64? = nil,
        match: PinnedVersion.Match = .same,
        asked: Int64 = 1_048_576
    ) -> Segments.Answer {
        Segments.answer(
            status: status,
            contentRange: range,
            contentLength: length,
            match: match,
            total: total,
            asked: asked
        )
    }

    @Test("a 206 from the asked byte, of the file's length and pinned version, is the segment's rest")
    func rest() {
        #expect(answer(206, range: "bytes 1048576-2097151/4194304", length: 1_048_576) == .rest)
    }

    @Test("a 206 from another byte, of another length or of another version is another file")
    func changed206() {
        #expect(answer(206, range: "bytes 0-1048575/4194304") == .changed(.rangeMismatch))
        #expect(answer(206, range: "bytes 1048576-2097151/4194305") == .changed(.remoteChanged))
        #expect(answer(206, range: "bytes 1048576-2097151/4194304", match: .other) == .changed(.remoteChanged))
        // No Content-Range or one that does not parse: nothing says which bytes these are.
        #expect(answer(206) == .changed(.remoteChanged))
        #expect(answer(206, range: "bytes */4194304") == .changed(.remoteChanged))
    }

    @Test("a 200 is the whole file: the range ignored when it is the same version and length")
    func whole() {
        #expect(answer(200, length: total) == .changed(.rangeIgnored))
        #expect(answer(200, length: total - 1) == .changed(.remoteChanged))
        #expect(answer(200, length: total, match: .other) == .changed(.remoteChanged))
        #expect(answer(200, length: nil) == .changed(.remoteChanged))
    }

    @Test("a success naming no version is unproven; any other status is decided as any answer")
    func unprovenAndOther() {
        #expect(answer(200, length: 512, match: .unproven) == .unproven)
        #expect(answer(206, range: "bytes 1048576-2097151/4194304", match: .unproven) == .unproven)
        #expect(answer(503, match: .unproven) == .other)
        #expect(answer(416, range: "bytes */4194304") == .other)
        #expect(answer(204, match: .same) == .other)
        #expect(answer(304) == .other)
    }
}
