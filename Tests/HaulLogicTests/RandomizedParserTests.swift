import CHaul
import Foundation
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulTransfer
@testable import HaulValues

/// Thousands of generated inputs for the parsers that read what servers send: nothing crashes, and
/// what is accepted keeps the properties a resume depends on.
@Suite("Randomized parsers")
struct RandomizedParserTests {
    /// A small deterministic generator (xorshift), so that a failure names a seed that reproduces it.
    typealias Generator = SeededGenerator

    static let seed = UInt64(Date().timeIntervalSince1970)

    /// A number as a server might write it: small, near a boundary, huge, signed, or not a number.
    func number(_ random: inout Generator) -> String {
        switch Int.random(in: 0..<8, using: &random) {
        case 0: return String(Int.random(in: 0...10, using: &random))
        case 1: return String(Int64.random(in: 0...Int64.max, using: &random))
        case 2: return "9223372036854775807"
        case 3: return "9223372036854775808"
        case 4: return "-" + String(Int.random(in: 0...1000, using: &random))
        case 5: return "+" + String(Int.random(in: 0...1000, using: &random))
        case 6: return ["", " ", "*", "0x10", "1e3", "١٢", "12a"].randomElement(using: &random)!
        default: return String(Int.random(in: 0...5_000_000, using: &random))
        }
    }

    func contentRange(_ random: inout Generator) -> String {
        let unit = ["bytes ", "bytes", "BYTES ", "bits ", " bytes  ", "bytes\t", ""].randomElement(using: &random)!
        var text = unit
        if Int.random(in: 0..<10, using: &random) == 0 {
            text += "*"
        } else {
            text += number(&random) + ["-", "--", "", " - "].randomElement(using: &random)! + number(&random)
        }
        text +=
            ["/", "", "//", " / "].randomElement(using: &random)!
            + (Bool.random(using: &random) ? "*" : number(&random))
        // Sometimes a stray character anywhere.
        if Int.random(in: 0..<4, using: &random) == 0, !text.isEmpty {
            var scalars = Array(text.unicodeScalars)
            let stray: [Unicode.Scalar] = ["\0", "\n", "\r", ",", ";", "é", "\u{202e}", " ", "-", "/"]
            scalars.insert(stray.randomElement(using: &random)!, at: Int.random(in: 0...scalars.count, using: &random))
            text = String(String.UnicodeScalarView(scalars))
        }
        return text
    }

    @Test("Content-Range: 20,000 generated values; what parses is consistent and round-trips")
    func contentRanges() {
        var random = Generator(seed: Self.seed)
        var accepted = 0
        for _ in 0..<20_000 {
            let text = contentRange(&random)
            guard let parsed = ContentRange(text) else { continue }
            accepted += 1
            switch parsed {
            case .range(let first, let last, let total):
                #expect(first >= 0 && first <= last, "seed \(Self.seed): \(text.debugDescription)")
                if let total { #expect(last < total, "seed \(Self.seed): \(text.debugDescription)") }
                #expect(ContentRange("bytes \(first)-\(last)/\(total.map(String.init) ?? "*")") == parsed)
            case .unsatisfied(let total):
                #expect(total >= 0)
                #expect(ContentRange("bytes */\(total)") == parsed)
            }
        }
        // The generator makes valid values too: the test would prove little if none were accepted.
        #expect(accepted > 50, "seed \(Self.seed): only \(accepted) accepted")
    }

    @Test("valid Content-Range values always parse exactly (10,000 generated)")
    func validRangesParse() {
        var random = Generator(seed: Self.seed &+ 1)
        for _ in 0..<10_000 {
            let total = Int64.random(in: 1...(Int64.max / 2), using: &random)
            let first = Int64.random(in: 0..<total, using: &random)
            let last = Int64.random(in: first..<total, using: &random)
            #expect(ContentRange("bytes \(first)-\(last)/\(total)") == .range(first: first, last: last, total: total))
            #expect(ContentRange("bytes \(first)-\(last)/*") == .range(first: first, last: last, total: nil))
        }
    }

    @Test("a response is appended only when it starts exactly where the partial ends (50,000 generated)")
    func neverSplice() {
        var random = Generator(seed: Self.seed &+ 2)
        let statuses = [200, 204, 206, 206, 206, 304, 404, 416, 416, 500, 503]
        var shortRangesAppended = 0
        // About 120 in 50,000 (107–139 over 6 seeds): far above 40 whatever the seed, and 0 if never reached.
        defer { #expect(shortRangesAppended > 40, "the generator must reach ranges that stop before the file") }
        for _ in 0..<50_000 {
            let offset: Int64 = Bool.random(using: &random) ? 0 : Int64.random(in: 0...2_000_000, using: &random)
            let knownTotal: Int64? = Bool.random(using: &random) ? nil : Int64.random(in: 0...4_000_000, using: &random)
            let contentRange: String? =
                switch Int.random(in: 0..<4, using: &random) {
                case 0: nil
                case 1: self.contentRange(&random)
                case 2:
                    "bytes \(offset)-\(Int64.random(in: offset...(offset + 3_000_000), using: &random))/\(knownTotal.map(String.init) ?? "*")"
                default: "bytes */\(knownTotal ?? offset)"
                }
            // Half the time the length a range announces (a server that caps its answers), else any.
            // (A generated range may span all of Int64: its length would overflow; then there is none.)
            let rangeLength: Int64? = contentRange.flatMap { ContentRange($0) }.flatMap { range in
                guard case .range(let first, let last, _) = range else { return nil }
                let (length, overflow) = (last - first).addingReportingOverflow(1)
                return overflow ? nil : length
            }
            let contentLength: Int64? =
                rangeLength != nil && Bool.random(using: &random)
                ? rangeLength : (Bool.random(using: &random) ? nil : Int64.random(in: 0...4_000_000, using: &random))
            let head = ResponseHead(
                status: statuses.randomElement(using: &random)!,
                contentRange: contentRange,
                contentLength: contentLength,
                entityTag: ["\"a\"", "\"b\"", nil].randomElement(using: &random)!,
                lastModified: nil,
                conflictingContentLengths: Int.random(in: 0..<10, using: &random) == 0 ? ["10", "20"] : nil
            )
            let knownTag = ["\"a\"", nil].randomElement(using: &random)!
            // Half the time the row is pinned to its ETag (issue 38): no body without it is used then.
            let pinned =
                Bool.random(using: &random)
                ? knownTag.flatMap { PinnedVersion(entityTag: $0, lastModified: nil, lastModifiedIsStrong: false) }
                : nil
            let form = [IfRangeForm.validator, .date, .plainRange].randomElement(using: &random)!
            let decision = ResponseDecision.decide(
                head: head,
                requestedOffset: offset,
                knownTotal: knownTotal,
                knownEntityTag: knownTag,
                pinned: pinned,
                ifRange: (form, Bool.random(using: &random))
            )
            let context =
                "seed \(Self.seed): \(head) from \(offset), known \(String(describing: knownTotal)) → \(decision)"
            // A success whose length is ambiguous is never used, whatever else it says.
            if (200...299).contains(head.status) && head.conflictingContentLengths != nil {
                #expect(
                    decision == .invalid("the server announced different lengths (Content-Length: 10, 20)"),
                    "\(context)"
                )
                continue
            }
            if pinned != nil, head.entityTag == nil {
                switch decision {
                case .append where head.status == 206 && offset > 0 && form != .plainRange: break  // If-Range vouched
                case .append, .replace:
                    Issue.record("a body without the pinned ETag was used: \(context)")
                default: break
                }
            }
            switch decision {
            case .invalid:
                Issue.record("invalid without a reason: \(context)")
            case .unproven:
                #expect(pinned != nil && (200...299).contains(head.status), "\(context)")
            case .askAgain(let next):
                #expect(pinned != nil && head.status == 200 && head.entityTag == knownTag && offset > 0, "\(context)")
                #expect(next != .validator, "\(context)")
            case .rejectURL:
                Issue.record("a URL rejected by the pure decision (only a transfer that moved rejects): \(context)")
            case .append(let total):
                if offset > 0 {
                    // Only a 206 whose range starts at the offset, from the same version, is appended.
                    #expect(head.status == 206, "\(context)")
                    guard
                        case .range(let first, let last, let rangeTotal)? = head.contentRange.flatMap({
                            ContentRange($0)
                        })
                    else {
                        Issue.record("appended without a readable Content-Range: \(context)")
                        continue
                    }
                    #expect(first == offset, "\(context)")
                    // A range that stops before the file is used only with a length that agrees.
                    if let rangeTotal, last != rangeTotal - 1 {
                        #expect(last < rangeTotal - 1 && head.contentLength == last - first + 1, "\(context)")
                        shortRangesAppended += 1
                    }
                    if let knownTotal, let rangeTotal { #expect(knownTotal == rangeTotal, "\(context)") }
                    if let knownTag, let tag = head.entityTag { #expect(tag == knownTag, "\(context)") }
                }
                if let total { #expect(total >= offset, "\(context)") }
            case .alreadyComplete(let total):
                #expect(total == offset && head.status == 416, "\(context)")
            case .notModified:
                Issue.record("a file kept as unchanged without a revalidation: \(context)")
            case .replace, .retryFromZero, .fail:
                break
            }
        }
    }

    @Test("Retry-After and checksum text: 10,000 generated values each, no crash, sane results")
    func retryAfterAndChecksums() {
        var random = Generator(seed: Self.seed &+ 3)
        let now = Date()
        for _ in 0..<10_000 {
            let text =
                Bool.random(using: &random)
                ? number(&random)
                : [
                    "Tue, 14 Nov 2023 22:14:20 GMT", "Mon, 32 Jan 2024 00:00:00 GMT", "yesterday", "",
                    "Wed, 01 Jan 3000 00:00:00 GMT",
                ].randomElement(using: &random)!
            if let delay = RetryPolicy.parseRetryAfter(text, now: now) {
                #expect(delay >= .zero, "seed \(Self.seed): \(text.debugDescription)")
            }
            let hexDigits = Array("0123456789abcdefABCDEFgz:")
            let candidate =
                ["sha256:", "sha1:", "md5:", "SHA256:", "crc:", ""].randomElement(using: &random)!
                + String(
                    (0..<Int.random(in: 0...70, using: &random)).map { _ in hexDigits.randomElement(using: &random)! }
                )
            if let checksum = Checksum(candidate) {
                #expect(checksum.hex.count == checksum.algorithm.hexLength, "\(candidate)")
                #expect(checksum.hex.allSatisfy { $0.isHexDigit && !$0.isUppercase }, "\(candidate)")
                #expect(Checksum(checksum.description) == checksum)
            }
        }
    }

    @Test("IMF-fixdates read by byte name the instant curl_getdate reads (20,000 generated, and near-misses)")
    func fixdatesAgreeWithCurl() {
        var random = Generator(seed: Self.seed)
        let days = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        for index in 0..<20_000 {
            // Any second to the year 9999, or one near the ends of months, leap days and centuries.
            let seconds: Int64 =
                index % 4 == 0
                ? Int64.random(in: 0...253_402_300_799, using: &random)
                : [951_782_400, 4_107_456_000, 1_709_164_800, 946_684_800, 4_102_444_800].randomElement(using: &random)!
                    + Int64.random(in: -172_800...172_800, using: &random)
            var time = time_t(seconds)
            var parts = tm()
            gmtime_r(&time, &parts)
            let text =
                "\(days[Int(seconds / 86_400 % 7)]), \(pad(parts.tm_mday)) \(months[Int(parts.tm_mon)]) "
                + "\(parts.tm_year + 1900) \(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec)) GMT"
            #expect(HTTPDate.fixdateSeconds(text) == seconds, "seed \(Self.seed): \(text)")
            #expect(Int64(curl_getdate(text, nil)) == seconds, "seed \(Self.seed): \(text)")
            // One byte changed: the fast path either refuses (curl reads it) or agrees with curl.
            var bytes = Array(text.utf8)
            bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0x20...0x7E, using: &random)
            let changed = String(decoding: bytes, as: UTF8.self)
            if let fast = HTTPDate.fixdateSeconds(changed) {
                #expect(fast == Int64(curl_getdate(changed, nil)), "seed \(Self.seed): \(changed)")
            }
        }
        for refused in [
            "Sun, 29 Feb 2023 00:00:00 GMT", "Sun, 31 Apr 2023 00:00:00 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1969 08:49:37 GMT", "Sun,  6 Nov 1994 08:49:37 GMT",
        ] {
            #expect(HTTPDate.fixdateSeconds(refused) == nil, "\(refused)")
        }
    }

    private func pad(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
