import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport

/// Issue 74, item 4, as a user meets it: root's `haul -o /tmp/NAME` where another user planted a link
/// (or a FIFO) at NAME, on a machine whose kernel does not refuse it (`fs.protected_symlinks=0`).
extension HaulCLITests {
    @Test(
        "haul -o through another user's link in a sticky world-writable folder: exit 7, the sentence says why, the target untouched"
    )
    func plantedLinkRefused() async throws {
        try #require(geteuid() == 0, "plants another user's link with lchown: the tests run as root, as CI does")
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        try server.makeFile("p.bin", size: 50_000)
        let shared = work.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: true)
        #expect(chmod(shared.path, 0o1777) == 0)
        let victim = work.appendingPathComponent("shadow")
        try Data("root:x:0:0".utf8).write(to: victim)
        let link = shared.appendingPathComponent("p.bin")
        #expect(symlink(victim.path, link.path) == 0 && lchown(link.path, 65_534, 65_534) == 0)
        let run = try await haul(["-o", link.path, server.url("p.bin").absoluteString], in: work)
        #expect(run.status == 7, "\(run.stderr)")
        #expect(
            run.stderr.contains("'\(link.path)' is a symbolic link owned by another user (uid 65534)"),
            "\(run.stderr)"
        )
        #expect(try Data(contentsOf: victim) == Data("root:x:0:0".utf8))
        #expect(server.accessLog().isEmpty)
    }
}
