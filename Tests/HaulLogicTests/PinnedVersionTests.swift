import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulTransfer
@testable import HaulValues

/// Issue 38, items 3–5: a body is taken for a new version only on evidence as strong as the pin, and
/// an ignored ETag `If-Range` is asked again in another form. Pure: no I/O.
@Suite("Pinned versions and If-Range forms")
struct PinnedVersionTests {
    let tag = PinnedVersion(
        entityTag: "\"v1\"",
        lastModified: "Sun, 06 Nov 1994 08:49:37 GMT",
        lastModifiedIsStrong: true
    )!
    let date = PinnedVersion(entityTag: nil, lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", lastModifiedIsStrong: true)!

    @Test func thePinIsTheStrongETagElseTheStrongDate() {
        #expect(tag.kind == .entityTag && tag.value == "\"v1\"")
        #expect(date.kind == .lastModified)
        #expect(PinnedVersion(entityTag: "W/\"v1\"", lastModified: "x", lastModifiedIsStrong: false) == nil)
        #expect(PinnedVersion(entityTag: nil, lastModified: "x", lastModifiedIsStrong: false) == nil)
        #expect(
            PinnedVersion(entityTag: "W/\"v1\"", lastModified: "x", lastModifiedIsStrong: true)?.kind == .lastModified
        )
    }

    @Test func anAnswerWithoutThePinsKindOfValidatorProvesNothing() {
        #expect(tag.match(entityTag: "\"v1\"", lastModified: nil) == .same)
        #expect(tag.match(entityTag: "\"v2\"", lastModified: nil) == .other)
        #expect(tag.match(entityTag: nil, lastModified: "Sun, 06 Nov 1994 08:49:37 GMT") == .unproven)
        #expect(tag.match(entityTag: "W/\"v2\"", lastModified: nil) == .unproven)
        #expect(date.match(entityTag: nil, lastModified: "Sun, 06 Nov 1994 08:49:37 GMT") == .same)
        #expect(date.match(entityTag: "\"x\"", lastModified: "Mon, 07 Nov 1994 08:49:37 GMT") == .other)
        #expect(date.match(entityTag: "\"x\"", lastModified: nil) == .unproven)
    }

    @Test func theFormsRunFromTheValidatorToTheDateToAPlainRange() {
        #expect(IfRangeForm.validator.next(hasStrongDate: true) == .date)
        #expect(IfRangeForm.validator.next(hasStrongDate: false) == .plainRange)
        #expect(IfRangeForm.date.next(hasStrongDate: true) == .plainRange)
        #expect(IfRangeForm.plainRange.next(hasStrongDate: true) == nil)
        let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        #expect(
            IfRangeForm.validator.value(entityTag: "\"v1\"", lastModified: lastModified, lastModifiedIsStrong: true)
                == "\"v1\""
        )
        #expect(
            IfRangeForm.date.value(entityTag: "\"v1\"", lastModified: lastModified, lastModifiedIsStrong: true)
                == lastModified
        )
        #expect(
            IfRangeForm.date.value(entityTag: "\"v1\"", lastModified: lastModified, lastModifiedIsStrong: false) == nil
        )
        #expect(
            IfRangeForm.plainRange.value(entityTag: "\"v1\"", lastModified: lastModified, lastModifiedIsStrong: true)
                == nil
        )
    }

    func head(
        _ status: Int,
        range: String? = nil,
        length: Int64?,
        etag: String?,
        type: String? = nil,
        acceptsRanges: Bool = false
    ) -> ResponseHead {
        var head = ResponseHead(
            status: status,
            contentRange: range,
            contentLength: length,
            entityTag: etag,
            lastModified: nil
        )
        head.contentType = type
        head.acceptsRanges = acceptsRanges
        return head
    }

    func decide(_ head: ResponseHead, from offset: Int64, form: IfRangeForm = .validator, date: Bool = true)
        -> ResponseDecision
    {
        ResponseDecision.decide(
            head: head,
            requestedOffset: offset,
            knownTotal: 1000,
            knownEntityTag: offset > 0 ? "\"v1\"" : nil,
            pinned: tag,
            ifRange: (form, date)
        )
    }

    @Test(
        "another version a file server names only weakly (Apache's W/ ETag of a file dated in the future) replaces the bytes, whole; never continues them"
    )
    func anotherVersionNamedWeakly() {
        let weak = head(200, length: 2000, etag: "W/\"v2\"", type: "application/octet-stream", acceptsRanges: true)
        #expect(decide(weak, from: 400) == .replace(total: 2000, reason: .remoteChanged))
        #expect(decide(weak, from: 0) == .append(total: 2000))  // after a restart
        #expect(tag.match(weak) == .other)  // as a segment's answer is judged
        #expect(tag.match(head(200, length: 2000, etag: "W/\"v1\"", acceptsRanges: true)) == .unproven)
        // A range of it is not spliced onto the pinned bytes.
        let range = head(206, range: "bytes 400-1999/2000", length: 1600, etag: "W/\"v2\"", acceptsRanges: true)
        #expect(decide(range, from: 400) == .retryFromZero(reason: .remoteChanged))
        // Not enough to stand for the file: the pinned tag itself made weak (the same bytes? nothing
        // says), no ranges offered (a framework's page), no length.
        let unprovable = [
            head(200, length: 2000, etag: "W/\"v1\"", acceptsRanges: true),
            head(200, length: 79, etag: "W/\"1f-busy\"", type: "text/html"),
            head(200, length: nil, etag: "W/\"v2\"", acceptsRanges: true),
        ]
        for answer in unprovable {
            guard case .unproven = decide(answer, from: 400) else {
                Issue.record("\(answer) replaced the pinned bytes")
                continue
            }
        }
    }

    @Test func anErrorPageAsTwoHundredIsAFailedAttemptNotANewVersion() {
        // The resume's answer: 79 bytes of HTML, no ETag. Before: "the remote file changed", replaced.
        let page = head(200, length: 79, etag: nil, type: "text/html")
        guard case .unproven(let detail) = decide(page, from: 400) else {
            Issue.record("an error page was taken for the file")
            return
        }
        #expect(detail.contains("text/html") && detail.contains("79 bytes") && detail.contains("no strong ETag"))
        // After a restart (the partial emptied, the pin kept): the answer from byte 0 must name its
        // version, with a length, too.
        guard case .unproven = decide(page, from: 0) else {
            Issue.record("an error page replaced a pinned file after a restart")
            return
        }
        #expect(decide(head(200, length: 2000, etag: nil), from: 0) != .append(total: 2000))
        #expect(decide(head(200, length: nil, etag: "\"v2\""), from: 0) != .append(total: nil))
        guard case .unproven(let noLength) = decide(head(200, length: nil, etag: "\"v2\""), from: 0) else {
            Issue.record("another version without a length replaced a pinned file")
            return
        }
        #expect(noLength.contains("not its length"), "\(noLength)")
        // The pinned version itself needs no length: a chunked or decoded body of it is the file.
        #expect(decide(head(200, length: nil, etag: "\"v1\""), from: 0) == .append(total: nil))
        // A new version that names itself, with its length, replaces the old one.
        #expect(decide(head(200, length: 2000, etag: "\"v2\""), from: 0) == .append(total: 2000))
        #expect(
            decide(head(200, length: 2000, etag: "\"v2\""), from: 400) == .replace(total: 2000, reason: .remoteChanged)
        )
        // A 206 of another version restarts; a failure status stays a failure.
        #expect(
            decide(head(206, range: "bytes 400-999/1000", length: 600, etag: "\"v2\""), from: 400)
                == .retryFromZero(reason: .remoteChanged)
        )
        #expect(decide(head(503, length: 79, etag: nil), from: 400) == .fail(status: 503))
        // Without a pin, as before: a fresh download takes what it gets.
        #expect(
            ResponseDecision.decide(head: page, requestedOffset: 0, knownTotal: nil) == .append(total: 79)
        )
    }

    @Test func aTwoHundredWithThePinnedETagToAnETagIfRangeIsAskedAgainInAnotherForm() {
        let whole = head(200, length: 1000, etag: "\"v1\"", acceptsRanges: true)
        #expect(decide(whole, from: 400) == .askAgain(.date))
        #expect(decide(whole, from: 400, date: false) == .askAgain(.plainRange))
        #expect(decide(whole, from: 400, form: .date) == .askAgain(.plainRange))
        // No form left, or a server that does not say it serves ranges: the range was ignored.
        #expect(decide(whole, from: 400, form: .plainRange) == .replace(total: 1000, reason: .rangeIgnored))
        #expect(
            decide(head(200, length: 1000, etag: "\"v1\""), from: 400) == .replace(total: 1000, reason: .rangeIgnored)
        )
        // A plain range's 206 proves its version only by carrying the pinned ETag.
        let plain206 = head(206, range: "bytes 400-999/1000", length: 600, etag: nil)
        guard case .unproven = decide(plain206, from: 400, form: .plainRange) else {
            Issue.record("a plain range's 206 without the ETag was appended")
            return
        }
        #expect(
            decide(head(206, range: "bytes 400-999/1000", length: 600, etag: "\"v1\""), from: 400, form: .plainRange)
                == .append(total: 1000)
        )
        // With If-Range sent, a 206 is the server's word that the version matched (RFC 9110 §13.1.5).
        #expect(decide(plain206, from: 400) == .append(total: 1000))
    }

    @Test func theMachineRetriesAnUnprovenAnswerAndAsksAgainWithoutCountingIt() {
        var machine = DownloadStateMachine(url: "http://h/f", retryLimit: 2)
        _ = machine.admit()
        #expect(machine.responseReceived(.unproven("an error page")) == .reject)
        guard
            case .retry(let error) = machine.transferEnded(
                .failed(HaulValues.DownloadError(code: .transport, url: nil))
            )
        else {
            Issue.record("an unproven answer was not retried")
            return
        }
        #expect(error.code == .unexpectedAnswer && error.isTransient)
        #expect(machine.failures == 1 && machine.restarts == 0)
        _ = machine.admit()
        #expect(machine.responseReceived(.askAgain(.date)) == .reject)
        #expect(
            machine.transferEnded(.failed(HaulValues.DownloadError(code: .transport, url: nil, curlCode: 23)))
                == .startRequest(truncatingPartial: false)
        )
        #expect(machine.state == .connecting && machine.failures == 1 && machine.restarts == 0)
    }
}
