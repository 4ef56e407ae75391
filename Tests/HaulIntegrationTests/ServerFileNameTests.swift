import Foundation
import Testing

@testable import Haul
@testable import HaulScheduler
@testable import HaulTestSupport
@testable import HaulTransfer
@testable import HaulValues

/// File names from the server (issue 18, item 3): `Content-Disposition`, else the final URL's last
/// segment, else `index.html`; always safe, never outside the folder, never over a file Haul did not
/// download, chosen before the first byte and kept across resumes and restarts.
@Suite("File names from the server", .timeLimit(.minutes(2)))
struct ServerFileNameTests {
    func configuration(_ state: URL? = nil) -> DownloadManager.Configuration {
        var configuration = DownloadManager.Configuration()
        configuration.bufferSize = 64 * 1024
        configuration.progressInterval = .milliseconds(20)
        configuration.stateDirectory = state
        return configuration
    }

    // MARK: pure parsing

    @Test(
        "Content-Disposition: RFC 6266's examples, quoted strings, RFC 5987 names first",
        arguments: [
            ("Attachment; filename=example.html", "example.html"),
            ("INLINE; FILENAME= \"an example.html\"", "an example.html"),
            ("attachment; filename*= UTF-8''%e2%82%ac%20rates", "€ rates"),
            ("attachment; filename=\"EURO rates\"; filename*=utf-8''%e2%82%ac%20rates", "€ rates"),
            ("attachment; filename*=iso-8859-1'en'%A3%20rates", "£ rates"),
            ("attachment; filename=\"a \\\"quoted\\\" name\"; size=3", "a \"quoted\" name"),
            ("attachment; filename=genome.jpeg; modification-date=\"Wed, 12 Feb 1997 16:29:51 -0500\"", "genome.jpeg"),
            ("attachment; filename=\"plain.txt\"; filename*=x-unknown''odd", "plain.txt"),
            ("attachment; filename=\"semi;colon.txt\"", "semi;colon.txt"),
        ] as [(String, String)]
    )
    func parsing(_ header: String, _ expected: String) {
        #expect(ServerFileName.fromContentDisposition(header) == expected)
    }

    @Test("a header without a name gives none; hostile names are made safe")
    func sanitising() {
        #expect(ServerFileName.fromContentDisposition("inline") == nil)
        #expect(ServerFileName.fromContentDisposition("attachment; size=10") == nil)
        #expect(ServerFileName.sanitized("../../x") == "x")
        #expect(ServerFileName.sanitized("/etc/passwd") == "passwd")
        #expect(ServerFileName.sanitized("C:\\Windows\\evil.exe") == "evil.exe")
        #expect(ServerFileName.sanitized(".bashrc") == "_.bashrc")
        #expect(ServerFileName.sanitized("..") == "_..")
        #expect(ServerFileName.sanitized("a\nb\0c") == "a_b_c")
        // Characters that reorder what is shown (issue 39, item 9): "evil\u{202E}txt.exe" shows as
        // "evilexe.txt"; C1 controls too.
        #expect(ServerFileName.sanitized("evil\u{202E}txt.exe") == "evil_txt.exe")
        #expect(ServerFileName.sanitized("a\u{2066}b\u{2069}\u{200F}c\u{061C}\u{9B}.txt") == "a_b__c__.txt")
        #expect(
            ServerFileName.choose(
                contentDisposition: "attachment; filename*=UTF-8''evil%E2%80%AEtxt.exe",
                url: "http://h/x"
            ) == "evil_txt.exe"
        )
        #expect(ServerFileName.sanitized("  ") == nil)
        #expect(ServerFileName.sanitized("dir/") == "dir")
        #expect(ServerFileName.sanitized(String(repeating: "é", count: 200) + ".iso")?.utf8.count ?? 0 <= 255)
        #expect(ServerFileName.sanitized(String(repeating: "é", count: 200) + ".iso")?.hasSuffix("é.iso") == true)
        #expect(
            ServerFileName.choose(contentDisposition: "attachment; filename=\"/\"", url: "http://h/a/b.bin") == "b.bin"
        )
        #expect(ServerFileName.choose(contentDisposition: nil, url: "http://h/") == "index.html")
        #expect(ServerFileName.choose(contentDisposition: nil, url: nil) == "index.html")
    }

    @Test("a name of megabytes is cut from the front in time linear in it (issue 39, item 8)", .timeLimit(.minutes(1)))
    func longNamesAreCutLinearly() {
        // Removing one character at a time from the front copied the rest each time: a 2 MB URL
        // in an input file cost 55 s of CPU; this one (4 MB) would take minutes.
        let long = String(repeating: "a", count: 4_000_000) + "é.iso"
        let name = ServerFileName.sanitized(long)
        #expect(name?.utf8.count == 255 && name?.hasSuffix("aé.iso") == true)
        #expect(ServerFileName.numbered(long, 12).hasSuffix("é.iso.12"))
        #expect(ServerFileName.numbered(long, 12).utf8.count == 255)
        // Cut at a character, never inside one: of 200 "é" (400 bytes), the last 126 and ".x" fit.
        let accents = ServerFileName.sanitized(String(repeating: "é", count: 200) + ".x")
        #expect(accents == String(repeating: "é", count: 126) + ".x")
        #expect(
            ServerFileName.choose(contentDisposition: nil, url: "http://h/" + String(repeating: "b", count: 2_000_000))
                .utf8.count == 255
        )
    }

    @Test("whatever a server sends, the name stays in the folder (10,000 random headers)")
    func randomHeadersStayInside() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ab./\\\"';=*%2e%2f%00%0a%5c..~ -_") + ["\u{7f}", "\u{1b}", "é", "\n", "\0"]
        for _ in 0..<10_000 {
            let length = Int.random(in: 0...30, using: &generator)
            let value = String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
            let name = ServerFileName.choose(contentDisposition: "attachment; filename=\(value)", url: "http://h/x")
            #expect(!name.isEmpty && !name.contains("/") && !name.hasPrefix("."), "\(value) → \(name)")
            #expect(!name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f }, "\(value) → \(name)")
            #expect(name.utf8.count <= 255)
        }
    }

    // MARK: against nginx

    @Test("each download is named as the server says, made safe, numbered when taken; nothing lands outside")
    func names() async throws {
        let (server, directory) = try await startServerAndDirectory(
            own: "/cd/redirected and / are locations matched exactly"
        )
        defer { stop(server, directory) }
        let source = try server.makeFile("f.bin", size: 150_000)
        let redirected = try server.makeFile("r/final-name.bin", size: 1_000, seed: 2)
        let folder = directory.appendingPathComponent("in")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let mine = Data("the user's own report\n".utf8)
        try mine.write(to: folder.appendingPathComponent("report.pdf"))
        let cases: [(path: String, name: String)] = [
            ("cd/plain/f.bin", "report.pdf.1"),  // report.pdf is the user's
            ("cd/utf8/f.bin", "naïve café.txt"),
            ("cd/dotfile/f.bin", "_.bashrc"),
            ("cd/control/f.bin", "bad_name_here_.txt"),
            ("cd/dots/f.bin", "_.."),  // made safe, never the parent
            ("cd/redirected", "final-name.bin"),  // the final URL's segment
            ("", "index.html"),
        ]
        try await withDownloadManager(configuration: configuration()) { manager in
            for (path, name) in cases {
                let download = try manager.download(DownloadRequest(url: server.url(path), folder: folder))
                let file = try await download.finished()
                #expect(file == folder.appendingPathComponent(name), "\(path)")
                #expect(download.destination == file)
            }
            // The traversal and the absolute path both name escaped.txt: the second is numbered.
            let first = try await manager.download(
                DownloadRequest(url: server.url("cd/traversal/f.bin"), folder: folder)
            )
            .finished()
            let second = try await manager.download(
                DownloadRequest(url: server.url("cd/absolute/f.bin"), folder: folder)
            )
            .finished()
            #expect(first.lastPathComponent == "escaped.txt" && second.lastPathComponent == "escaped.txt.1")
        }
        #expect(try Data(contentsOf: folder.appendingPathComponent("report.pdf")) == mine)
        for name in ["report.pdf.1", "naïve café.txt", "_.bashrc", "escaped.txt", "escaped.txt.1"] {
            #expect(try Data(contentsOf: folder.appendingPathComponent(name)) == source, "\(name)")
        }
        #expect(try Data(contentsOf: folder.appendingPathComponent("final-name.bin")) == redirected)
        #expect(
            try String(contentsOf: folder.appendingPathComponent("index.html"), encoding: .utf8).hasPrefix(
                "the root page"
            )
        )
        let expected = Set(cases.map(\.name) + ["report.pdf", "escaped.txt", "escaped.txt.1", ".haul"])
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: folder.path)) == expected)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["in"])
    }

    @Test("two downloads that the server gives one name at once get name and name.1, each its own bytes")
    func sameNameAtOnce() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let a = try server.makeFile("a.bin", size: 1024 * 1024 + 32 * 1024, seed: 5)
        let b = try server.makeFile("b.bin", size: 1024 * 1024 + 32 * 1024, seed: 6)
        try await withDownloadManager(configuration: configuration()) { manager in
            let first = try manager.download(DownloadRequest(url: server.url("cd/paced/a.bin"), folder: directory))
            let second = try manager.download(DownloadRequest(url: server.url("cd/paced/b.bin"), folder: directory))
            let files = [try await first.finished(), try await second.finished()]
            #expect(Set(files.map(\.lastPathComponent)) == ["gated-report.bin", "gated-report.bin.1"])
            #expect(try Data(contentsOf: files[0]) == a)
            #expect(try Data(contentsOf: files[1]) == b)
            // Each transfer freed the name it claimed when it ended (read once the loop stopped).
            await manager.shutdown()
            #expect(manager.holdings.claimedNames == 0)
        }
    }

    @Test(
        "the name is known before the first byte, recorded, kept by a later process, and never replaces a file put there since"
    )
    func keptAcrossRestarts() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("k.bin", size: 3 * 1024 * 1024)
        let state = directory.appendingPathComponent("state")
        let folder = directory.appendingPathComponent("in")
        let url = server.url("cd/gated/k.bin")
        let named = folder.appendingPathComponent("gated-report.bin")

        let first = try DownloadManager(configuration: configuration(state))
        let download = try first.download(DownloadRequest(url: url, folder: folder))
        // Not named until the answer's headers: the folder still, or already the name when the loop
        // read them before this line ran (it did once, under the full suite on two busy cores); never
        // anything else.
        #expect(download.destination == folder || download.destination == named, "\(download.destination)")
        var events = download.events.makeAsyncIterator()
        let receiving = await events.next { if case .receiving = $0 { true } else { false } }
        #expect(receiving != nil)
        #expect(download.destination == named)
        await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 256 * 1024 } else { false } }
        await first.shutdown()
        let entry = try #require(try DownloadManager.journalEntries(stateDirectory: state).first)
        #expect(entry.destination == named.path && entry.bytesReceived > 0)
        #expect(!FileManager.default.fileExists(atPath: named.path))
        // Someone puts a file of that name there meanwhile: it is kept, and the download goes beside it.
        let theirs = Data("someone else's file\n".utf8)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try theirs.write(to: named)
        let beside = folder.appendingPathComponent("gated-report.bin.1")
        try await withDownloadManager(configuration: configuration(state)) { manager in
            let restored = try #require(manager.download(id: download.id))
            #expect(restored.destination == named)
            #expect(try await restored.finished() == beside)
            #expect(restored.destination == beside)
            // Asked for again: complete, under the name it got, nothing transferred.
            let again = try manager.download(DownloadRequest(url: url, folder: folder))
            #expect(try await again.finished() == beside)
            #expect(again.wasAlreadyComplete)
        }
        #expect(try Data(contentsOf: named) == theirs)
        #expect(try Data(contentsOf: beside) == source)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
                == ["gated-report.bin", "gated-report.bin.1"]
        )
        #expect(server.accessLog().filter { $0.uri == "/cd/gated/k.bin" }.map(\.status) == [200, 206])
    }

    @Test("with a key of the caller's, a signed link refreshed between runs continues the same download")
    func keyedAcrossURLs() async throws {
        let (server, directory) = try await startServerAndDirectory()
        defer { stop(server, directory) }
        let source = try server.makeFile("s.bin", size: 3 * 1024 * 1024)
        let state = directory.appendingPathComponent("state")
        let folder = directory.appendingPathComponent("in")
        func request(_ signature: String) -> DownloadRequest {
            var request = DownloadRequest(url: server.url("cd/gated/s.bin?sig=\(signature)"), folder: folder)
            request.key = "export-42"
            return request
        }
        let first = try DownloadManager(configuration: configuration(state))
        let download = try first.download(request("AAA"))
        var events = download.events.makeAsyncIterator()
        await events.next { if case .progress(let p) = $0 { p.bytesReceived >= 256 * 1024 } else { false } }
        await first.shutdown()
        #expect(download.id == DownloadID(key: "export-42", folder: folder))
        // Not restored on its own: the loop would admit the row from the old URL before the request
        // for the new one arrives (a race that a loaded machine lost once).
        var later = configuration(state)
        later.resumesUnfinishedDownloads = false
        try await withDownloadManager(configuration: later) { manager in
            let again = try manager.download(request("BBB"))
            #expect(again.id == download.id)
            #expect(try await again.finished() == folder.appendingPathComponent("gated-report.bin"))
            let later = try manager.download(request("CCC"))
            #expect(try await later.finished() == folder.appendingPathComponent("gated-report.bin"))
            #expect(later.wasAlreadyComplete)
        }
        #expect(try Data(contentsOf: folder.appendingPathComponent("gated-report.bin")) == source)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["gated-report.bin"])
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasSuffix(".part") }.isEmpty
        )
        let log = server.accessLog()
        #expect(log.filter { $0.uri == "/cd/gated/s.bin?sig=AAA" }.map(\.status) == [200])
        #expect(log.filter { $0.uri == "/cd/gated/s.bin?sig=BBB" }.map(\.status) == [206])
        #expect(log.filter { $0.uri.hasSuffix("sig=CCC") }.isEmpty)
    }

    @Test("a folder that is a file is refused before anything is sent")
    func folderIsAFile() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("plain-file")
        try Data("x".utf8).write(to: file)
        try await withDownloadManager(configuration: configuration()) { manager in
            #expect {
                try manager.download(DownloadRequest(url: URL(string: "http://127.0.0.1:1/x")!, folder: file))
            } throws: { error in
                (error as? DownloadError)?.errno == ENOTDIR
            }
        }
    }
}
