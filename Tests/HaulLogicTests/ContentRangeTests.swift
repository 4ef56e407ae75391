import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulTransfer

@Suite("Content-Range parsing")
struct ContentRangeTests {
    @Test(arguments: [
        ("bytes 0-499/1234", ContentRange.range(first: 0, last: 499, total: 1234)),
        ("bytes 500-999/1000", .range(first: 500, last: 999, total: 1000)),
        ("bytes 0-0/1", .range(first: 0, last: 0, total: 1)),
        ("bytes 10-19/*", .range(first: 10, last: 19, total: nil)),
        ("bytes */1234", .unsatisfied(total: 1234)),
        ("Bytes 1-2/3", .range(first: 1, last: 2, total: 3)),
        ("  bytes 1-2/3\r\n", .range(first: 1, last: 2, total: 3)),
        (
            "bytes 9223372036854775806-9223372036854775806/9223372036854775807",
            .range(first: 9_223_372_036_854_775_806, last: 9_223_372_036_854_775_806, total: 9_223_372_036_854_775_807)
        ),
    ])
    func valid(_ text: String, _ expected: ContentRange) {
        #expect(ContentRange(text) == expected)
    }

    @Test(arguments: [
        "", "bytes", "bytes ", "byte 0-1/2", "items 0-1/2", "bytes 0-1", "bytes 1-0/5", "bytes 0-5/5",
        "bytes -1-2/3", "bytes 0--2/3", "bytes a-b/c", "bytes 0-1/-3", "bytes 0-1/2/3", "bytes */*",
        "bytes 0-99999999999999999999/1", "bytes +1-2/3", "bytes 1 - 2/3x", "bytes 0-1/ ", "bytes=0-1/2",
    ])
    func invalid(_ text: String) {
        #expect(ContentRange(text) == nil)
    }

    @Test("random input never crashes and never yields an inconsistent range")
    func randomInput() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("bytes 0123456789-/*+ \t,=B")
        for _ in 0..<20_000 {
            let length = Int.random(in: 0..<28, using: &generator)
            let text = String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
            for candidate in [text, "bytes " + text] {
                switch ContentRange(candidate) {
                case .range(let first, let last, let total)?:
                    #expect(first >= 0 && first <= last)
                    if let total { #expect(last < total) }
                case .unsatisfied(let total)?:
                    #expect(total >= 0)
                case nil:
                    break
                }
            }
        }
    }
}

@Suite("Response decisions")
struct ResponseDecisionTests {
    func head(_ status: Int, range: String? = nil, length: Int64? = nil, etag: String? = nil) -> ResponseHead {
        ResponseHead(status: status, contentRange: range, contentLength: length, entityTag: etag, lastModified: nil)
    }

    @Test func freshDownload() {
        #expect(
            ResponseDecision.decide(head: head(200, length: 100), requestedOffset: 0, knownTotal: nil)
                == .append(total: 100)
        )
        #expect(ResponseDecision.decide(head: head(200), requestedOffset: 0, knownTotal: nil) == .append(total: nil))
    }

    @Test func aRangeThatEndsBeforeTheFileIsAppendedWhenItsLengthAgrees() {
        let capped = head(206, range: "bytes 40-59/100", length: 20)
        #expect(ResponseDecision.decide(head: capped, requestedOffset: 40, knownTotal: 100) == .append(total: 100))
        #expect(ResponseDecision.rangeEnd(of: capped) == 60)
        // From byte 0, even unasked (no Range header is sent for the first request).
        let first = head(206, range: "bytes 0-29/100", length: 30)
        #expect(ResponseDecision.decide(head: first, requestedOffset: 0, knownTotal: nil) == .append(total: 100))
        #expect(ResponseDecision.rangeEnd(of: first) == 30)
        // A length that disagrees with the range, or none: the body could run past the range.
        for length: Int64? in [21, nil] {
            #expect(
                ResponseDecision.decide(
                    head: head(206, range: "bytes 40-59/100", length: length),
                    requestedOffset: 40,
                    knownTotal: 100
                )
                    == .retryFromZero(reason: .rangeMismatch)
            )
        }
        // Extreme values never trap.
        let huge = head(206, range: "bytes 0-9223372036854775805/9223372036854775807", length: Int64.max)
        #expect(
            ResponseDecision.decide(head: huge, requestedOffset: 0, knownTotal: nil)
                == .retryFromZero(reason: .rangeMismatch)
        )
        #expect(ResponseDecision.rangeEnd(of: huge) == Int64.max - 1)
        // Ranges to the end, or of an unknown total, have no end of their own.
        #expect(ResponseDecision.rangeEnd(of: head(206, range: "bytes 40-99/100", length: 60)) == nil)
        #expect(ResponseDecision.rangeEnd(of: head(206, range: "bytes 40-59/*", length: 20)) == nil)
        #expect(ResponseDecision.rangeEnd(of: head(200, range: "bytes 40-59/100", length: 20)) == nil)
    }

    @Test func differingContentLengthsAreInvalid() {
        var twice = head(200, length: 500)
        twice.conflictingContentLengths = ["1000", "500"]
        #expect(
            ResponseDecision.decide(head: twice, requestedOffset: 0, knownTotal: nil)
                == .invalid("the server announced different lengths (Content-Length: 1000, 500)")
        )
        var resumed = head(206, range: "bytes 40-99/100", length: 60)
        resumed.conflictingContentLengths = ["60", "10"]
        guard case .invalid = ResponseDecision.decide(head: resumed, requestedOffset: 40, knownTotal: 100) else {
            Issue.record("a 206 with two lengths was used")
            return
        }
        // An error status stays that status: its body is never used.
        var missing = head(404, length: 0)
        missing.conflictingContentLengths = ["0", "9"]
        #expect(ResponseDecision.decide(head: missing, requestedOffset: 0, knownTotal: nil) == .fail(status: 404))
    }

    @Test func resumeAcceptedOnlyFromTheOffset() {
        #expect(
            ResponseDecision.decide(
                head: head(206, range: "bytes 40-99/100", length: 60),
                requestedOffset: 40,
                knownTotal: 100
            )
                == .append(total: 100)
        )
        #expect(
            ResponseDecision.decide(
                head: head(206, range: "bytes 0-99/100", length: 100),
                requestedOffset: 40,
                knownTotal: 100
            )
                == .retryFromZero(reason: .rangeMismatch)
        )
        #expect(
            ResponseDecision.decide(head: head(206, range: "bytes 41-99/100"), requestedOffset: 40, knownTotal: nil)
                == .retryFromZero(reason: .rangeMismatch)
        )
        // A range that stops short of the end when we asked for everything from 40 on.
        #expect(
            ResponseDecision.decide(head: head(206, range: "bytes 40-49/100"), requestedOffset: 40, knownTotal: 100)
                == .retryFromZero(reason: .rangeMismatch)
        )
        #expect(
            ResponseDecision.decide(head: head(206, range: "garbage"), requestedOffset: 40, knownTotal: 100)
                == .retryFromZero(reason: .rangeMismatch)
        )
        #expect(
            ResponseDecision.decide(head: head(206), requestedOffset: 40, knownTotal: 100)
                == .retryFromZero(reason: .rangeMismatch)
        )
    }

    @Test func unknownTotalComesFromTheLength() {
        #expect(
            ResponseDecision.decide(
                head: head(206, range: "bytes 40-99/*", length: 60),
                requestedOffset: 40,
                knownTotal: nil
            )
                == .append(total: 100)
        )
    }

    @Test func changedRemoteFileIsDetected() {
        #expect(
            ResponseDecision.decide(head: head(206, range: "bytes 40-199/200"), requestedOffset: 40, knownTotal: 100)
                == .retryFromZero(reason: .remoteChanged)
        )
        #expect(
            ResponseDecision.decide(
                head: head(206, range: "bytes 40-99/100", etag: "\"b\""),
                requestedOffset: 40,
                knownTotal: 100,
                knownEntityTag: "\"a\""
            ) == .retryFromZero(reason: .remoteChanged)
        )
        #expect(
            ResponseDecision.decide(
                head: head(200, length: 100, etag: "\"b\""),
                requestedOffset: 40,
                knownTotal: 100,
                knownEntityTag: "\"a\""
            )
                == .replace(total: 100, reason: .remoteChanged)
        )
        #expect(
            ResponseDecision.decide(head: head(200, length: 120), requestedOffset: 40, knownTotal: 100)
                == .replace(total: 120, reason: .remoteChanged)
        )
    }

    @Test func ignoredRangeReplacesThePartial() {
        #expect(
            ResponseDecision.decide(head: head(200, length: 100), requestedOffset: 40, knownTotal: 100)
                == .replace(total: 100, reason: .rangeIgnored)
        )
    }

    @Test func rangeNotSatisfiable() {
        #expect(
            ResponseDecision.decide(head: head(416, range: "bytes */100"), requestedOffset: 100, knownTotal: nil)
                == .alreadyComplete(total: 100)
        )
        #expect(
            ResponseDecision.decide(head: head(416), requestedOffset: 100, knownTotal: 100)
                == .alreadyComplete(total: 100)
        )
        #expect(
            ResponseDecision.decide(head: head(416, range: "bytes */80"), requestedOffset: 100, knownTotal: nil)
                == .retryFromZero(reason: .rangeNotSatisfiable)
        )
        #expect(
            ResponseDecision.decide(head: head(416, range: "bytes */80"), requestedOffset: 100, knownTotal: 100)
                == .retryFromZero(reason: .remoteChanged)
        )
        #expect(
            ResponseDecision.decide(head: head(416), requestedOffset: 50, knownTotal: nil)
                == .retryFromZero(reason: .rangeNotSatisfiable)
        )
        #expect(ResponseDecision.decide(head: head(416), requestedOffset: 0, knownTotal: nil) == .fail(status: 416))
    }

    @Test func revalidationKeepsAnUnchangedFileAndTakesAChangedOne() {
        // A conditional request for a complete file of 100 bytes: a 304 keeps it, a 200 replaces it.
        #expect(
            ResponseDecision.decide(head: head(304), requestedOffset: 0, knownTotal: 100, revalidating: true)
                == .notModified(total: 100)
        )
        #expect(
            ResponseDecision.decide(
                head: head(200, length: 120),
                requestedOffset: 0,
                knownTotal: 100,
                revalidating: true
            )
                == .append(total: 120)
        )
        // Without a known length there is nothing to keep: a 304 is a status like any other.
        #expect(
            ResponseDecision.decide(head: head(304), requestedOffset: 0, knownTotal: nil, revalidating: true)
                == .fail(status: 304)
        )
    }

    @Test(arguments: [301, 304, 400, 401, 403, 404, 410, 429, 500, 502, 503])
    func errorStatusesFail(_ status: Int) {
        #expect(
            ResponseDecision.decide(head: head(status), requestedOffset: 0, knownTotal: nil) == .fail(status: status)
        )
        #expect(
            ResponseDecision.decide(head: head(status), requestedOffset: 10, knownTotal: 20) == .fail(status: status)
        )
    }
}
