import Foundation
import Glibc
import Haul
import Testing

/// Issue 76, item 4: what `haul` and HaulPostgres need beyond downloads is public API of `Haul` (they
/// build without `package` access): the URL check, redaction, the per-host key, names from URLs and
/// the rule for names others wrote.
@Suite("The public helpers")
struct PublicHelpersTests {
    @Test("a request's host key is the host in lower case and the port, the scheme's when none is written")
    func hostKey() throws {
        let key = { (text: String) in
            try DownloadRequest(url: #require(URL(string: text)), destination: URL(fileURLWithPath: "/tmp/x")).hostKey
        }
        #expect(try key("http://Example.COM/a") == "example.com:80")
        #expect(try key("https://example.com/a") == "example.com:443")
        #expect(try key("HTTPS://example.com:8443/a") == "example.com:8443")
        #expect(try key("http://u:p@127.0.0.1:9/a") == "127.0.0.1:9")
    }

    @Test("a URL is shown without its user name and password, and only those")
    func redacted() throws {
        let url = try #require(URL(string: "https://alice:hunter2@example.com:8443/f.iso?sig=abc#part"))
        #expect(DownloadRequest.redacted(url) == "https://example.com:8443/f.iso?sig=abc#part")
        let plain = try #require(URL(string: "http://example.com/a%20b"))
        #expect(DownloadRequest.redacted(plain) == "http://example.com/a%20b")
    }

    @Test("the URL check refuses what Haul cannot download, with the public error")
    func checkedURL() throws {
        let good = try #require(URL(string: "https://example.com/a"))
        #expect(try DownloadRequest.checkedURL(good) == good)
        for (text, code) in [
            ("ftp://example.com/a", DownloadError.Code.unsupportedScheme),
            ("http:///a", .invalidURL),
            ("http://example.com:0/a", .invalidURL),
        ] {
            let url = try #require(URL(string: text))
            let failure = try #require(Self.failure(url), "\(text) accepted")
            #expect(failure.code == code, "\(text): \(failure)")
        }
        // The URL last found good is kept (not parsed again); a bad URL after it is still refused,
        // and the good one is still taken after the bad.
        #expect(try DownloadRequest.checkedURL(good) == good)
        let unlike = try #require(URL(string: "https://example.com:0/a"))
        #expect(Self.failure(unlike)?.code == .invalidURL)
        #expect(try DownloadRequest.checkedURL(good) == good)
        let secret = try #require(URL(string: "ftp://alice:hunter2@example.com/a"))
        let failure = try #require(Self.failure(secret))
        #expect(!failure.description.contains("hunter2") && failure.url?.contains("hunter2") == false, "\(failure)")
    }

    /// What the URL check throws for `url`, or `nil` when it takes it.
    static func failure(_ url: URL) -> DownloadError? {
        let result = Result { () throws(DownloadError) in try DownloadRequest.checkedURL(url) }
        if case .failure(let error) = result { return error }
        return nil
    }

    @Test("a name from a URL: its last segment decoded and made safe, numbered when taken")
    func fileNames() {
        #expect(DownloadRequest.fileName(fromURL: "https://h/dir/a%20b.iso?x=1#f") == "a b.iso")
        #expect(DownloadRequest.fileName(fromURL: "https://h/") == "index.html")
        #expect(DownloadRequest.fileName(fromURL: "https://h/dir/") == "dir")
        #expect(DownloadRequest.fileName(fromURL: "https://h/..%2Fetc%2Fpasswd") == "_.._etc_passwd")
        #expect(DownloadRequest.fileName(fromURL: "https://h/.bashrc") == "_.bashrc")
        #expect(DownloadRequest.fileName(fromURL: "https://h/a%0Ab") == "a_b")
        #expect(DownloadRequest.fileName("f.iso", numbered: 0) == "f.iso")
        #expect(DownloadRequest.fileName("f.iso", numbered: 12) == "f.iso.12")
        let long = String(repeating: "é", count: 127) + ".iso"  // 258 bytes
        let numbered = DownloadRequest.fileName(long, numbered: 3)
        #expect(numbered.utf8.count <= 255 && numbered.hasSuffix("é.iso.3"))
    }

    @Test("a name others wrote: refused by its text, and by a link out of its folder")
    func confinedPath() throws {
        for (path, words) in [
            ("", "is empty"), ("/etc/passwd", "absolute"), ("a/../../b", "'..'"), ("a/.haul/b", "state folder"),
            ("./.", "the output folder itself"),
        ] {
            let refusal = try #require(ConfinedPath.refusal(path), "\(path)")
            #expect(refusal.contains(words), "\(path): \(refusal)")
        }
        #expect(ConfinedPath.refusal("a/b.iso") == nil && ConfinedPath.refusal("./a") == nil)
        #expect(ConfinedPath.stateFolderName == ".haul")

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("confined-\(UUID())").path
        let outside = folder + "-outside"
        defer {
            try? FileManager.default.removeItem(atPath: folder)
            try? FileManager.default.removeItem(atPath: outside)
        }
        try FileManager.default.createDirectory(atPath: folder + "/inside", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        #expect(symlink(outside, folder + "/out") == 0 && symlink("inside", folder + "/in") == 0)
        #expect(ConfinedPath.escape("inside/new/f.iso", in: folder) == nil)
        #expect(ConfinedPath.escape("in/f.iso", in: folder) == nil, "the user's own link inside the folder")
        let escape = try #require(ConfinedPath.escape("out/f.iso", in: folder))
        #expect(escape.contains("leads out of the output folder"), "\(escape)")
        let root = try #require(ConfinedPath.resolved(folder))
        #expect(ConfinedPath.escape("out/f.iso", inResolved: root) == escape)
        #expect(ConfinedPath.escape("f.iso", in: folder + "/not-yet") == nil, "no folder yet: no link in it")
    }
}
