import ArgumentParser
import Foundation
import Testing

@testable import Haul
@testable import HaulCLI
@testable import HaulIO
@testable import HaulTestSupport
@testable import HaulValues

@Suite("haul: arguments and file names")
struct HaulArgumentTests {
    let noDirectories: (String) -> Bool = { _ in false }

    @Test func oneURLToAFile() {
        let plan = DownloadPlan.make(urls: ["http://h/a.bin"], output: "/tmp/x/out.bin", isDirectory: noDirectories)
        #expect(plan.items == [.init(url: "http://h/a.bin", destination: "/tmp/x/out.bin")])
        #expect(plan.outputDirectory == "/tmp/x")
    }

    @Test func oneURLToAnExistingDirectoryOrATrailingSlash() {
        let plan = DownloadPlan.make(urls: ["http://h/a.bin"], output: "/tmp/d", isDirectory: { $0 == "/tmp/d" })
        #expect(plan.items == [.init(url: "http://h/a.bin", destination: "/tmp/d/a.bin")])
        let slash = DownloadPlan.make(urls: ["http://h/a.bin"], output: "new/", isDirectory: noDirectories)
        #expect(slash.items == [.init(url: "http://h/a.bin", destination: "new/a.bin")])
        #expect(slash.outputDirectory == "new")
    }

    @Test func severalURLsGoToADirectoryWithDistinctNames() {
        let plan = DownloadPlan.make(
            urls: ["http://h/x/a.bin", "http://g/y/a.bin", "http://h/a.bin?v=2", "http://h/"],
            output: nil,
            isDirectory: noDirectories
        )
        #expect(plan.items.map(\.destination) == ["./a.bin", "./a.bin.1", "./a.bin.2", "./index.html"])
        #expect(plan.outputDirectory == ".")
    }

    @Test func aNameTakenBySomethingElseGetsASuffixButAGivenPathIsKept() {
        // ./a.bin is the user's, ./a.bin.1 another URL's; ./b.bin is this URL's own earlier download.
        let occupied = [
            ("http://h/x/a.bin", "./a.bin"), ("http://h/x/a.bin", "./a.bin.1"), ("http://h/b.bin", "./a.bin"),
        ]
        let isOccupied = { (url: String, path: String) in occupied.contains { $0 == (url, path) } }
        let plan = DownloadPlan.make(
            urls: ["http://h/x/a.bin", "http://h/b.bin"],
            output: nil,
            isDirectory: noDirectories,
            isOccupied: isOccupied
        )
        #expect(plan.items.map(\.destination) == ["./a.bin.2", "./b.bin"])
        // Two URLs sharing a name still get distinct names when nothing exists.
        let same = DownloadPlan.make(
            urls: ["http://h/a.bin", "http://g/a.bin"],
            output: "/o",
            isDirectory: { _ in true }
        ) { _, _ in false }
        #expect(same.items.map(\.destination) == ["/o/a.bin", "/o/a.bin.1"])
        // -o FILE is what the user asked for: never renamed.
        let given = DownloadPlan.make(urls: ["http://h/x/a.bin"], output: "a.bin", isDirectory: noDirectories) { _, _ in
            true
        }
        #expect(given.items.map(\.destination) == ["a.bin"])
    }

    @Test(.timeLimit(.minutes(1)))  // trying every earlier name for each URL took 85 s here
    func manyURLsOfOneNameAreNumberedInOrder() {
        // 20,000 URLs named a.bin, and a user's file at ./a.bin.7: every name distinct, in list order.
        let urls = (0..<20_000).map { "http://h/a.bin?\($0)" }
        let plan = DownloadPlan.make(urls: urls, output: nil, isDirectory: noDirectories) { _, path in
            path == "./a.bin.7"
        }
        let expected = ["./a.bin"] + (1..<20_001).filter { $0 != 7 }.map { "./a.bin.\($0)" }
        // (a comparison inside #expect would describe both arrays)
        let same = plan.items.map(\.destination) == expected
        #expect(same)
        // A file of this URL's own at a name skipped for an earlier URL is still found: ./a.bin is the
        // user's, ./a.bin.1 was the second URL's in an earlier run.
        let own = DownloadPlan.make(
            urls: ["http://h/x/a.bin", "http://h/y/a.bin"],
            output: nil,
            isDirectory: noDirectories
        ) { url, path in
            path == "./a.bin" || (path == "./a.bin.1" && url != "http://h/y/a.bin")
        }
        #expect(own.items.map(\.destination) == ["./a.bin.2", "./a.bin.1"])
    }

    @Test("names an input file gives (out=) are used as given, never looked up, and a URL's name goes past them")
    func givenNamesComeFirst() {
        var looked: [String] = []
        let plan = DownloadPlan.make(
            urls: ["http://h/a.bin", "http://h/x", "http://h/y", "http://h/a.bin?2"],
            output: "/d",
            given: [nil, "a.bin", "sub/b.bin"],  // the last URL's name is missing: nil
            isDirectory: { $0 == "/d" }
        ) { _, path in
            looked.append(path)
            return false
        }
        #expect(plan.items.map(\.destination) == ["/d/a.bin.1", "/d/a.bin", "/d/sub/b.bin", "/d/a.bin.2"])
        #expect(looked == ["/d/a.bin.1", "/d/a.bin.2"])
        // -o naming the one URL's file wins over its out=.
        let file = DownloadPlan.make(
            urls: ["http://h/a"],
            output: "/d/f.bin",
            given: ["g.bin"],
            isDirectory: { _ in false }
        )
        #expect(file.items.map(\.destination) == ["/d/f.bin"])
    }

    @Test("an input file's lines end with LF, CR LF or CR, and errors count them so")
    func inputFileLineEnds() throws {
        #expect(InputFile.Reader.lines(of: "a\r\nb\rc\nd").map(String.init) == ["a", "b", "c", "d"])
        #expect(InputFile.Reader.lines(of: "a\n\r\n").map(String.init) == ["a", "", ""])
        #expect(InputFile.Reader.lines(of: "").map(String.init) == [""])
        // "é" and a URL past it keep their bytes.
        #expect(
            try InputFile.parse("http://h/é\r\n  out=é.bin\r\n").entries == [
                InputFile.Entry(urls: ["http://h/é"], out: "é.bin")
            ]
        )
        #expect(throws: CLIError.self) { try InputFile.parse("http://h/a\r\n  out=../x\r\n") }
        do {
            _ = try InputFile.parse("http://h/a\r\n\r\n  out\r\n")
            Issue.record("a line without = was read")
        } catch {
            #expect(error.description.contains("line 3"))
        }
    }

    @Test func aSuffixedNameStillFitsInAFileName() {
        let long = String(repeating: "é", count: 127) + ".b"  // 256 bytes before trimming
        let base = ServerFileName.fromURL(
            "http://h/" + long.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)!
        )
        #expect(base.utf8.count <= 255)
        let plan = DownloadPlan.make(
            urls: ["http://h/a", "http://g/a"].map { $0.replacingOccurrences(of: "a", with: base) },
            output: nil,
            isDirectory: noDirectories
        )
        let second = String(plan.items[1].destination.dropFirst(2))
        #expect(
            second.hasSuffix(".b.1") && second.utf8.count <= 255
                && second.unicodeScalars.allSatisfy { $0 == "é" || $0 == "." || $0 == "b" || $0 == "1" }
        )
        #expect(
            ServerFileName.numbered(String(repeating: "x", count: 255), 12) == String(repeating: "x", count: 252)
                + ".12"
        )
    }

    @Test(arguments: [
        ("http://h/dir/file.txt", "file.txt"),
        ("http://h/dir/file.txt?x=1#frag", "file.txt"),
        ("http://h/a%20b.txt", "a b.txt"),
        ("http://h/..", "_.."),
        ("http://h/%2e%2e", "_.."),
        ("http://h/a/%2e%2e%2fetc%2fpasswd", "_.._etc_passwd"),
        ("http://h/.bashrc", "_.bashrc"),
        ("http://h/x%2Fy", "x_y"),
        ("http://h/ctl%0A%0Dname", "ctl__name"),
        ("http://h/", "index.html"),
        ("http://h", "index.html"),
        ("http://h/.haul", "_.haul"),
        ("http://h/back%5Cslash", "back_slash"),
    ])
    func fileNamesAreSanitised(_ url: String, _ expected: String) {
        let name = ServerFileName.fromURL(url)
        #expect(name == expected)
        #expect(!name.contains("/"))
        #expect(name != "." && name != "..")
    }

    @Test("rates and sizes read as curl reads them: K, M, G count 1024s, in either case")
    func sizes() {
        #expect(HaulCommand.parseSize("1000") == 1000)
        #expect(HaulCommand.parseSize("500K") == 512_000)
        #expect(HaulCommand.parseSize("1.5m") == 1_572_864)
        #expect(HaulCommand.parseSize("2G") == 2_147_483_648)
        for bad in ["", "K", "-1M", "0", "1T", "abc", "nan", "1e30"] {
            #expect(HaulCommand.parseSize(bad) == nil, "\(bad)")
        }
    }

    @Test("options as curl, wget and aria2c users type them: -x4 -j8 -o- joined, -L and -O, sizes with K and M")
    func optionsAsTyped() throws {
        let command = try HaulCommand.parseAsRoot(
            ["-x4", "-j8", "-o-", "-L", "-O", "--max-size", "1M", "--buffer-size", "64K", "-Afetcher", "http://h/a"]
        )
        let parsed = try #require(command as? HaulCommand)
        #expect(parsed.network.connections == 4 && parsed.concurrency == 8 && parsed.output == "-")
        #expect(parsed.location && parsed.remoteName && parsed.network.userAgent == "fetcher")
        #expect(parsed.files.maxSize?.value == 1_048_576 && parsed.files.bufferSize.value == 65_536)
        #expect(ByteCount(argument: "0")?.value == 0 && ByteCount(argument: "4096")?.value == 4096)
        for bad in ["", "-1", "1T", "lots"] { #expect(ByteCount(argument: bad) == nil, "\(bad)") }
    }

    @Test(
        "a checksum as haul writes it (sha256:HEX) or as aria2 does (sha-256=HEX); a URL without a scheme gets http://"
    )
    func checksumFormsAndSchemes() {
        let hex = String(repeating: "ab", count: 32)
        let forms = ["sha256:\(hex)", "SHA-256=\(hex)", "sha256=\(hex)", "sha-256:\(hex.uppercased())"]
        for form in forms {
            #expect(HaulCommand.parseChecksum(form) == Checksum(algorithm: .sha256, hex: hex), "\(form)")
        }
        #expect(HaulCommand.parseChecksum("sha-1=" + String(repeating: "0", count: 40))?.algorithm == .sha1)
        for bad in ["sha256", "sha512=\(hex)", "md5=\(hex)", "sha256:xyz"] {
            #expect(HaulCommand.parseChecksum(bad) == nil, "\(bad)")
        }
        #expect(HaulCommand.withDefaultScheme("example.com/file") == "http://example.com/file")
        #expect(HaulCommand.withDefaultScheme("https://example.com/file") == nil)
        #expect(HaulCommand.withDefaultScheme("ftp://example.com/file") == nil)  // refused later, by its scheme
        #expect(HaulCommand.withDefaultScheme("127.0.0.1:8080/a?b") == "http://127.0.0.1:8080/a?b")
        #expect(HaulCommand.withDefaultScheme("localhost/x") == "http://localhost/x")
        #expect(HaulCommand.withDefaultScheme("[::1]:80/x") == "http://[::1]:80/x")
        // Not a host: left as typed, and refused as a URL.
        for text in ["not a url at all", "::::", "/tmp/file", "a b.com/x", ".com/x", "x./y"] {
            #expect(HaulCommand.withDefaultScheme(text) == nil, "\(text)")
        }
    }

    @Test("header lines as -v shows them: values that never carry a secret shown, any other sent one redacted")
    func headerLinesRedacted() {
        #expect(HeaderLog.redacted("Range: bytes=100-", sent: true) == "Range: bytes=100-")
        #expect(HeaderLog.redacted("If-Range: \"v1\"", sent: true) == "If-Range: \"v1\"")
        #expect(HeaderLog.redacted("Authorization: Basic Ym9iOnB3", sent: true) == "Authorization: <redacted>")
        #expect(HeaderLog.redacted("X-Anything: token", sent: true) == "X-Anything: <redacted>")
        #expect(HeaderLog.redacted("Cookie: session=1", sent: true) == "Cookie: <redacted>")
        #expect(HeaderLog.redacted("GET /a:b HTTP/1.1", sent: true) == "GET /a:b HTTP/1.1")
        #expect(HeaderLog.redacted("ETag: \"v1\"", sent: false) == "ETag: \"v1\"")
        #expect(HeaderLog.redacted("Set-Cookie: id=42", sent: false) == "Set-Cookie: <redacted>")
        #expect(HeaderLog.redacted("HTTP/1.1 206 Partial Content", sent: false) == "HTTP/1.1 206 Partial Content")
    }

    @Test(".netrc read as curl reads it: machines by host, default, tokens on one line or several, macdef skipped")
    func netrcParsing() {
        let netrc = Netrc(
            parsing: """
                machine a.example login ann password "pass word"
                macdef boot
                machine evil.example login x password y

                machine B.example
                  login bo
                  password b2
                machine a.example login later password ignored
                default login anyone password any
                """
        )
        #expect(netrc.credentials(forHost: "a.example") == Netrc.Credentials(login: "ann", password: "pass word"))
        #expect(netrc.credentials(forHost: "b.example") == Netrc.Credentials(login: "bo", password: "b2"))
        #expect(netrc.credentials(forHost: "evil.example") == Netrc.Credentials(login: "anyone", password: "any"))
        #expect(Netrc(parsing: "machine h login l").credentials(forHost: "other") == nil)
        let credentials = Credentials(user: nil, netrc: netrc)
        let url = URL(string: "http://a.example/f")!
        // Percent-encoded in the URL, as curl decodes it.
        #expect(credentials.apply(to: url).absoluteString == "http://ann:pass%20word@a.example/f")
        // A URL that names its user keeps it; -u wins over .netrc.
        #expect(credentials.apply(to: URL(string: "http://me:pw@a.example/f")!).user == "me")
        #expect(Credentials(user: ("u", "p"), netrc: netrc).apply(to: url).user == "u")
    }

    @Test("the input file is read one entry at a time: an entry is whole at the next URL line or at the end")
    func inputFileReaderYieldsEntriesInTurn() throws {
        let text = "http://h/a\n  out=x/a.bin\n  split=2\nhttp://h/b\thttp://m/b\n# c\nhttp://h/c\n  out=../c\n"
        var reader = InputFile.Reader(text)
        #expect(try reader.next() == InputFile.Entry(urls: ["http://h/a"], out: "x/a.bin"))
        #expect(reader.ignored.map(\.option) == ["split"] && reader.ignored.map(\.line) == [3])
        #expect(try reader.next() == InputFile.Entry(urls: ["http://h/b", "http://m/b"]))
        // The third entry's mistake is met when it is read, after the entries before it.
        #expect(throws: CLIError.self) { try reader.next() }
        var good = InputFile.Reader(String(text.dropLast("  out=../c\n".count)))
        var urls: [[String]] = []
        while let entry = try good.next() { urls.append(entry.urls) }
        #expect(urls == [["http://h/a"], ["http://h/b", "http://m/b"], ["http://h/c"]])
        #expect(try good.next() == nil)
    }

    @Test("an entry is read again from where the reader said it starts: each, and only it, whatever the line ends")
    func inputFileEntriesAreReadAgainFromTheirStart() throws {
        let text =
            "# list\r\nhttp://h/é\r\n  out=é/a.bin\r\n  header=X-A: 1\r\n\r\nhttp://h/b\thttp://m/b\n  # note\n"
            + "  out=b.bin\rhttp://h/c\u{0C}\thttp://h/indented\n  checksum=md5=900150983cd24fb0d6963f7d28e17f72\nhttp://h/last"
        var reader = InputFile.Reader(text)
        var entries: [(InputFile.Entry, Int)] = []
        while let entry = try reader.next() { entries.append((entry, reader.entryStart)) }
        #expect(
            entries.map(\.0.urls) == [
                ["http://h/é"], ["http://h/b", "http://m/b"], ["http://h/c"], ["http://h/indented"], ["http://h/last"],
            ]
        )
        #expect(entries[1].0.out == "b.bin" && entries[3].0.checksum != nil)
        for (entry, start) in entries {
            var again = InputFile.Reader(text, at: start)
            #expect(try again.next() == entry)
            #expect(InputFile.Reader.firstURL(in: text, at: start) == entry.urls.first)
            #expect(text.utf8.dropFirst(start).starts(with: entry.urls[0].utf8) || entry.urls[0] == "http://h/indented")
        }
        // Past the end: nothing, and no crash.
        var past = InputFile.Reader(text, at: text.utf8.count + 10)
        #expect(try past.next() == nil)
    }

    @Test("a line is a URL when \"://\" comes before any \"=\"; an option's value may hold one")
    func schemeSeparatorBeforeEquals() {
        let cases: [(String, Bool)] = [
            ("http://h/a", true), ("  https://h/a?x=1", true), ("out=http://h/a", false), ("a:/b", false),
            (":/://x", true), ("::// ", true), ("a=b://c", false), ("", false), ("://", true), (":/=//", false),
        ]
        for (line, isURL) in cases {
            #expect(InputFile.Reader.hasSchemeSeparator(beforeEquals: line[...].utf8) == isURL, "\(line)")
        }
    }

    @Test("a run finds each entry's URL again by its place in the run: the arguments' first, then the input file's")
    func entrySourceFindsEntriesByIndex() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let list = directory.appendingPathComponent("list.txt").path
        let lines = (0..<500).map {
            "http://h/\($0)\n" + ($0 % 3 == 0 ? "  out=\($0).bin\n" : "") + ($0 % 7 == 0 ? "\n# gap\n" : "")
        }
        try lines.joined().write(toFile: list, atomically: true, encoding: .utf8)
        let source = try HaulCommand.parse(["-i", list, "http://arg/0", "http://arg/1"]).entrySource()
        let all = Array(source)
        #expect(all.count == 502 && source.count == 502)
        for index in all.indices { #expect(source.url(at: index) == all[index].urls.first) }
        #expect(source.url(at: 502) == nil && source.url(at: -1) == nil)
    }

    @Test("a run follows downloads by their ids' bits: one per destination, each until its outcome, caller ids too")
    func followingKeepsIndexesUntilOutcomes() {
        let ids = (0..<4).map { DownloadID(destination: URL(fileURLWithPath: "/out/\($0).bin")) }
        #expect(ids.allSatisfy { Following.Key($0) != nil })
        #expect(Set(ids.compactMap(Following.Key.init)).count == 4)
        #expect(Following.Key(DownloadID(rawValue: ids[0].rawValue)) == Following.Key(ids[0]))
        for odd in ["", "abc", String(repeating: "g", count: 32), ids[0].rawValue.uppercased(), ids[0].rawValue + "0"] {
            #expect(Following.Key(DownloadID(rawValue: odd)) == nil, "\(odd)")
        }
        let own = DownloadID(rawValue: "a caller's own id")
        let following = Following()
        #expect(following.follow(ids[0], index: 0))
        #expect(following.follow(ids[1], index: 1, destination: "out/from-url.bin"))
        #expect(!following.follow(ids[0], index: 2))  // the same destination again: one download
        #expect(following.follow(own, index: 3))
        #expect(following.follow(ids[2], index: 4))
        #expect(following.followed(ids[0]) == Following.Followed(index: 0))
        #expect(following.followed(ids[1]) == Following.Followed(index: 1, destination: "out/from-url.bin"))
        #expect(following.followed(own) == Following.Followed(index: 3))
        #expect(following.followed(ids[3]) == nil)
        following.refused(ids[2], index: 0)  // not its item: still followed
        #expect(following.followed(ids[2]) == Following.Followed(index: 4))
        following.refused(ids[2], index: 4)
        #expect(following.followed(ids[2]) == nil)
        func event(_ id: DownloadID, _ what: DownloadEvent) -> DownloadManagerEvent {
            DownloadManagerEvent(id: id, destination: URL(fileURLWithPath: "/out/x"), event: what)
        }
        #expect(!following.ended(event(ids[0], .paused(DownloadProgress(bytesReceived: 0, totalBytes: nil)))))
        #expect(following.followed(ids[0]) != nil)
        #expect(!following.ended(event(ids[0], .completed(URL(fileURLWithPath: "/out/0.bin")))))
        #expect(following.followed(ids[0]) == nil)
        #expect(!following.ended(event(ids[1], .cancelled)))
        #expect(!following.allQueued())
        // Its place is free again: a later follow of another download there shows no old destination.
        #expect(following.follow(ids[3], index: 1))
        #expect(following.followed(ids[3]) == Following.Followed(index: 1))
        #expect(!following.ended(event(own, .failed(DownloadError(code: .httpStatus, url: nil)))))
        let outcome = following.finish()
        #expect(outcome.completed == 1 && outcome.failed == 1 && outcome.notCompleted == 2)
    }

    @Test("a run's list is checked and counted whole; the names given are kept only when some URL is to be named")
    func entrySourceCountsAndKeepsGivenNames() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let list = directory.appendingPathComponent("list.txt").path
        try "http://h/a\n  out=a.bin\nhttp://h/b\n  out=b.bin\n".write(toFile: list, atomically: true, encoding: .utf8)
        let named = try HaulCommand.parse(["-i", list]).entrySource()
        #expect(named.count == 2 && named.givenNames.isEmpty)
        #expect(Array(named).map(\.out) == ["a.bin", "b.bin"])
        let mixed = try HaulCommand.parse(["-i", list, "http://h/c"]).entrySource()
        #expect(mixed.count == 3 && mixed.givenNames == ["a.bin", "b.bin"])
        #expect(Array(mixed).map(\.urls) == [["http://h/c"], ["http://h/a"], ["http://h/b"]])
        try "# nothing\n".write(toFile: list, atomically: true, encoding: .utf8)
        #expect(throws: CLIError.self) { try HaulCommand.parse(["-i", list]).entrySource() }
    }

    @Test func inputFileIgnoresBlanksAndComments() throws {
        let text = "# mirrors\nhttp://h/a\n\n  http://h/b  \r\n#http://h/c\n"
        #expect(try InputFile.parse(text).entries.map(\.urls) == [["http://h/a"], ["http://h/b"]])
    }

    @Test("the input file in aria2's form: TAB-separated mirrors, and out=, checksum=, header= under a URL")
    func inputFileOptions() throws {
        let digest = String(repeating: "ab", count: 32)
        let text = """
            http://a/x.iso\thttp://b/x.iso\t http://c/x.iso
              out=images/x.iso
              checksum=sha-256=\(digest)
            \theader=Authorization: Bearer s3cr3t
              header=X-Tenant: acme
              split=5
            http://d/y?q=1
            """
        let file = try InputFile.parse(text)
        #expect(file.entries.count == 2)
        #expect(file.entries[0].urls == ["http://a/x.iso", "http://b/x.iso", "http://c/x.iso"])
        #expect(file.entries[0].out == "images/x.iso")
        #expect(file.entries[0].checksum == Checksum("sha256:\(digest)"))
        #expect(
            file.entries[0].headers == [
                DownloadHeader("Authorization", "Bearer s3cr3t"), DownloadHeader("X-Tenant", "acme"),
            ]
        )
        #expect(file.entries[1] == InputFile.Entry(urls: ["http://d/y?q=1"]))
        #expect(file.ignored.map(\.option) == ["split"] && file.ignored.map(\.line) == [6])
    }

    @Test(
        "a bad input file says which line, and never repeats a header's value",
        arguments: [
            ("  out=x\nhttp://a/b", "line 1 sets an option before any URL"),
            ("http://a/b\n  out=../x", "out= on line 2"),
            ("http://a/b\n  out=/etc/x", "out= on line 2"),
            ("http://a/b\n  checksum=sha-512=00", "checksum= on line 2"),
            ("http://a/b\n  header=Range: s3cr3t", "header= on line 2"),
            ("http://a/b\n  header=no-colon-s3cr3t", "header= on line 2"),
            ("http://a/b\n  just-words", "line 2 is not an option"),
        ] as [(String, String)]
    )
    func inputFileErrors(_ text: String, _ says: String) {
        #expect {
            try InputFile.parse(text)
        } throws: { error in
            "\(error)".contains(says) && !"\(error)".contains("s3cr3t")
        }
    }

    @Test func optionsParse() throws {
        let command = try HaulCommand.parse(["-o", "out", "-j", "8", "--json", "http://h/a", "http://h/b"])
        #expect(command.output == "out")
        #expect(command.concurrency == 8)
        #expect(command.json)
        #expect(command.urls == ["http://h/a", "http://h/b"])
        #expect(command.reporterMode == .json)
        let quiet = try HaulCommand.parse(["--quiet", "--state", "/tmp/s", "-i", "list.txt"])
        #expect(quiet.reporterMode == .quiet)
        #expect(quiet.state == "/tmp/s")
        #expect(quiet.inputFile == "list.txt")
        let faults = try HaulCommand.parse([
            "--retries", "0", "--stall-timeout", "2.5", "--max-size", "1000", "--checksum",
            "sha256:" + String(repeating: "0", count: 64), "http://h/a",
        ])
        #expect(faults.retries == 0 && faults.network.stallTimeout.value == 2.5 && faults.files.maxSize?.value == 1000)
        #expect(faults.checksum.flatMap(Checksum.init)?.algorithm == .sha256)
    }

    @Test("names from URLs never leave the output folder, whatever the URL (10,000 random ones)")
    func randomNamesStayInside() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ab./\\%2e%2f%00%0a%5c..~ -_?#=&:@!$'()*+,;") + ["\u{7f}", "\u{1b}", "é", "\u{202e}"]
        for _ in 0..<10_000 {
            let length = Int.random(in: 0...24, using: &generator)
            let path = String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
            let name = ServerFileName.fromURL("http://h/" + path)
            #expect(!name.isEmpty && !name.contains("/") && name != "." && name != "..", "\(path) → \(name)")
            #expect(!name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f }, "\(path) → \(name)")
            let plan = DownloadPlan.make(urls: ["http://h/" + path], output: "/srv/out/", isDirectory: { _ in true })
            let destination = URL(fileURLWithPath: plan.items[0].destination).standardizedFileURL.path
            #expect(
                destination.hasPrefix("/srv/out/") && destination.count > "/srv/out/".count,
                "\(path) → \(destination)"
            )
        }
    }

    @Test(arguments: [
        [], ["-j", "0", "http://h/a"], ["--quiet", "--json", "http://h/a"], ["--buffer-size", "12", "http://h/a"],
        ["-j", "many", "http://h/a"], ["--retries", "-1", "http://h/a"], ["--stall-timeout", "0", "http://h/a"],
        ["--checksum", "sha256:abc", "http://h/a"], ["--checksum", "crc32:00000000", "http://h/a"],
        ["--checksum", "md5:" + String(repeating: "0", count: 32), "http://h/a", "http://h/b"],
        ["--max-size", "-5", "http://h/a"], ["--ca-file", "/nonexistent/ca.pem", "https://h/a"],
    ])
    func badArgumentsAreRefused(_ arguments: [String]) {
        #expect(throws: (any Error).self) { try HaulCommand.parse(arguments) }
    }
}

/// The CLI's text helpers that replace Foundation's: checked against Foundation itself, which the
/// tests may link.
@Suite("haul: text and JSON output")
struct HaulTextTests {
    @Test("--json lines are one object per line, with the schema version, and parse back whatever the strings hold")
    func jsonLinesRoundTrip() throws {
        let strings = [
            "", "plain", "quote \" and back\\slash", "http://h/a/b?c=d&e", "line\nbreak\r\ttab",
            "\u{1}\u{1f}\u{7f}", "é ü 日本 \u{202e} 🧪",
        ]
        for text in strings {
            let progress = DownloadProgress(
                bytesReceived: Int64(1) << 40,
                totalBytes: nil,
                bytesPerSecond: 7,
                estimatedTimeRemaining: .milliseconds(100),
                connections: 3
            )
            let line = JSONEvent.line(for: .progress(progress), url: text, path: "/a/" + text, download: nil)
            #expect(line.hasSuffix("\n") && !line.dropLast().contains("\n"))
            let parsed = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(parsed["url"] as? String == text && parsed["path"] as? String == "/a/" + text)
            #expect((parsed["bytesReceived"] as? NSNumber)?.int64Value == Int64(1) << 40)
            #expect((parsed["bytesPerSecond"] as? NSNumber)?.intValue == 7)
            #expect((parsed["estimatedTimeRemaining"] as? NSNumber)?.doubleValue == 0.1)
            #expect(parsed["totalBytes"] == nil)  // unknown: absent
            #expect((parsed["schema"] as? NSNumber)?.intValue == JSONEvent.schema)
            // Keys sorted, slashes as they are.
            #expect(
                line.hasPrefix(
                    "{\"bytesPerSecond\":7,\"bytesReceived\":1099511627776,\"connections\":3,"
                        + "\"estimatedTimeRemaining\":0.1,\"event\":\"progress\","
                )
            )
        }
        let failed = JSONEvent.line(
            for: .failed(DownloadError(code: .httpStatus, url: "http://h/a", httpStatus: 404)),
            url: "http://h/a",
            path: "/x",
            download: nil
        )
        let object = try #require(try JSONSerialization.jsonObject(with: Data(failed.utf8)) as? [String: Any])
        #expect(Set(object.keys) == ["schema", "event", "url", "path", "error", "code", "httpStatus"])
        #expect(object["event"] as? String == "failed" && (object["httpStatus"] as? NSNumber)?.intValue == 404)
    }

    @Test("a bar fits in one row of any terminal width: details go first, then the bar, then the name")
    func barsFitTheWidth() {
        let progresses = [
            DownloadProgress(bytesReceived: 0, totalBytes: nil),
            DownloadProgress(
                bytesReceived: 123_456_789,
                totalBytes: 987_654_321_000,
                bytesPerSecond: 12_345_678,
                estimatedTimeRemaining: .seconds(98_765)
            ),
        ]
        let names = [
            "a.bin", "a-rather-long-file-name-that-does-not-fit-anywhere.tar.gz", "日本語のファイル名です.bin", "é\u{301}x.bin",
        ]
        for width in 2...250 {
            for name in names {
                for progress in progresses {
                    for status in ["", "queued", "retry in 12.3s", "connecting"] {
                        var row = Reporter.Row(name: name)
                        row.progress = progress
                        row.status = status
                        let line = Reporter.bar(for: row, width: width)
                        #expect(Text.columns(of: line) <= width - 1, "\(width) \(name) \(line)")
                        if width >= 40 {
                            #expect(line.hasPrefix(String(name.prefix(3))), "\(width): \(line)")
                            #expect(line.contains("%"))
                        }
                        if width >= 80 { #expect(line.contains("░") || line.contains("█"), "\(line)") }
                    }
                }
            }
        }
        #expect(Text.columns(of: "日本") == 4 && Text.columns(of: "e\u{301}") == 1 && Text.columns(of: "ab") == 2)
        #expect(Text.truncated("日本語", toColumns: 5) == "日本" && Text.truncated("abc", toColumns: 9) == "abc")
    }

    @Test("percent decoding as Foundation's removingPercentEncoding does it")
    func percentDecoding() {
        let cases = ["a%20b", "%2e%2E", "%C3%A9t%C3%A9", "no-escapes", "", "%", "%2", "%zz", "%C3", "100%25", "a+b"]
        for text in cases {
            #expect(text.percentDecoded == text.removingPercentEncoding, "\(text)")
        }
    }

    @Test("numbers formatted as String(format:) printed them")
    func formatting() {
        for value in [0, 0.04, 0.05, 0.15, 0.96, 1, 9.99, 12.345, 1023.95, 123_456.7] {
            #expect(Format.tenths(value) == String(format: "%.1f", value), "\(value)")
        }
        for value in [0, 5, 9, 10, 59, 123] {
            #expect(Format.zeroPadded(value, width: 2) == String(format: "%02d", value))
            #expect(Format.rightAligned(value, width: 3) == String(format: "%3d", value))
        }
        #expect("ab".padded(to: 4) == "ab  " && "abcdef".padded(to: 4) == "abcd")
        #expect(" \t a b \r\n".trimmingSpaces == "a b" && "\u{3000}x\u{a0}".trimmingSpaces == "x")
        #expect(Reporter.size(1536) == "1.5 KiB" && Reporter.size(1000) == "1000 B")
        #expect(Reporter.duration(.seconds(3725)) == "1h02m" && Reporter.duration(.seconds(65)) == "1m05s")
    }
}
